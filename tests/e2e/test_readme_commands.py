"""The README's server command works as documented (its test command is CI itself)."""

from __future__ import annotations

import os
import socket
import sqlite3
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


def serve_demo(tmp_path: Path, *args: str) -> str:
    """`scripts/serve.sh --demo ARGS` with the user's data directory in tmp_path: its output."""
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "serve.sh"), "--demo", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def test_serve_demo_runs_a_gang_with_the_cli_and_the_client(tmp_path: Path) -> None:
    grpc_port, http_port = free_ports(2)
    output = serve_demo(tmp_path, "--port", str(grpc_port), "--http-port", str(http_port))
    assert "All jobs finished: 3 jobs: 3 succeeded" in output
    assert output.count("SUCCEEDED on local-0") == 2
    assert "==> demo succeeded" in output
    # Embedded defaults: the database and the pods' files are in the user's data directory.
    assert (tmp_path / "data" / "armada-server" / "armada.db").exists()
    # It shows what armada-server said at start-up: where it listens, where its state is.
    assert f"listening on 127.0.0.1:{grpc_port}" in output
    assert f"  web UI, REST API and metrics: http://127.0.0.1:{http_port}/" in output
    assert f"  data directory: {tmp_path / 'data' / 'armada-server'} (kept between" in output


def test_serve_demo_talks_to_the_ports_of_a_config_file(tmp_path: Path) -> None:
    """Ports set in a --config file, not on the command line: the demo still talks to the
    server it started (not to whatever listens on localhost:50051)."""
    grpc_port, http_port = free_ports(2)
    config = tmp_path / "armada.yaml"
    config.write_text(f"port: {grpc_port}\nhttp_port: {http_port}\n")
    output = serve_demo(tmp_path, "--config", str(config))
    assert f"==> the demo talks to armada-server at 127.0.0.1:{grpc_port}" in output
    assert "==> demo succeeded" in output
    database = tmp_path / "data" / "armada-server" / "armada.db"
    with sqlite3.connect(database) as db:  # the demo's jobs are in this server's database
        [(jobs,)] = db.execute("SELECT count(*) FROM jobs WHERE queue = 'demo'").fetchall()
    assert jobs == 5  # a gang of 3 with the CLI, a gang of 2 with the client
