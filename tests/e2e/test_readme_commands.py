"""The README's server command works as documented (its test command is CI itself)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_demo_runs_a_gang_with_the_cli_and_the_client(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "serve.sh"), "--demo", "--port", str(free_port()),
         "--http-port", str(free_port())],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "All jobs finished: 3 jobs: 3 succeeded" in output
    assert output.count("SUCCEEDED on local-0") == 2
    assert "==> demo succeeded" in output
    # Embedded defaults: the database and the pods' files are in the user's data directory.
    assert (tmp_path / "data" / "armada-server" / "armada.db").exists()
