"""examples/simulate/run.py simulates its workload under instantaneous fair share and under a
one-hour usage half-life and writes the comparison: the latecomer queue waits less with the
half-life."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_writes_the_comparison(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "simulate" / "run.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=850,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "comparison.json").read_text())
    assert [r["label"] for r in result["runs"]] == ["instant.yaml", "half_life.yaml"]
    instant, decayed = (r["figures"]["queues"]["interactive"] for r in result["runs"])
    assert instant["jobs_run"] == decayed["jobs_run"] == 120
    assert decayed["wait_seconds"]["p50"] < instant["wait_seconds"]["p50"]
    assert "<svg" in (tmp_path / "comparison.html").read_text()
    assert "instant: interactive waited p50" in done.stdout
    assert f"wrote {tmp_path / 'comparison.json'}" in done.stdout
