"""examples/prefect/run.py exits 0 only when its flow succeeded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_runs_to_success(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "prefect" / "run.py")],
        capture_output=True,
        text=True,
        timeout=200,
        env={"PATH": "/usr/bin:/bin", "PREFECT_HOME": str(tmp_path), "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "3 Armada jobs: SUCCEEDED, SUCCEEDED, SUCCEEDED" in done.stdout
