"""The README's server command works as documented (its test command is CI itself)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def free_ports(count: int) -> list[int]:
    """Distinct free ports: all bound at once while they are picked (one at a time, the
    same port can come back twice)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for each in sockets:
            each.bind(("127.0.0.1", 0))
        return [int(each.getsockname()[1]) for each in sockets]
    finally:
        for each in sockets:
            each.close()


def test_serve_demo_runs_a_gang_with_the_cli_and_the_client(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    grpc_port, http_port = free_ports(2)
    done = subprocess.run(
        [
            "bash",
            str(ROOT / "scripts" / "serve.sh"),
            "--demo",
            "--port",
            str(grpc_port),
            "--http-port",
            str(http_port),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "All jobs finished: 3 jobs: 3 succeeded" in output
    assert output.count("SUCCEEDED on local-0") == 2
    assert "==> demo succeeded" in output
    # Embedded defaults: the database and the pods' files are in the user's data directory.
    assert (tmp_path / "data" / "armada-server" / "armada.db").exists()
