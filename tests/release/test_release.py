"""The five distributions as a user gets them: scripts/release_check.py passes.

It builds the sdists and wheels, runs `twine check`, checks what each ships (readme, license
file, py.typed, classifiers, project URLs, ranges on sibling requirements), checks that
prefect-armada refuses a fastapi that breaks its Prefect, and installs each distribution alone
with its orchestrator into a fresh virtual environment with README.md's commands verbatim and
uv.lock's versions, then imports it and loads its entry points.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def locked_version(name: str) -> str:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    return next(str(p["version"]) for p in lock["package"] if p["name"] == name)


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.timeout(1800)
def test_release_check_passes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "release_check.py")],
        capture_output=True,
        text=True,
        timeout=1700,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-8000:]
    log = done.stderr
    for line in (
        "twine check --strict",
        "prefect-armada refuses prefect==3.7.7 with fastapi==0.155.0",
        "entry point [console_scripts] armada = armada_core.cli:main",
        "entry point [console_scripts] armada-server = armada_server.cli:main",
        "entry point [console_scripts] armada-executor = armada_server.executor_cli:main",
        "found by Airflow's providers manager",
        "loaded by Prefect's collections; worker type 'armada' registered",
        "release check passed",
        # Each orchestrator at its locked version, not the newest.
        *(f", {name} {locked_version(name)}" for name in ("apache-airflow", "dagster", "prefect")),
    ):
        assert line in log, f"{line!r} missing from the release check's output:\n{log[-8000:]}"
