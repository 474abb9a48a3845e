"""examples/airflow/run.py, exactly as the README tells users to run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
@pytest.mark.slow
def test_the_example_dag_runs_end_to_end() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "airflow" / "run.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (
        "tasks: {'evaluate': 'success', 'preprocess': 'success', 'train': 'success'}" in done.stdout
    )
    assert "evaluating the model trained by 4 workers" in done.stdout
