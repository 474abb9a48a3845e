"""The example in examples/dagster runs end to end and exits 0."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).parents[2]


def test_example_materializes_everything() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "dagster" / "run.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "check accuracy_above_0_9: passed" in done.stdout
