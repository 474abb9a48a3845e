"""`armada ... | head -1`: a command whose standard output is closed ends quietly with 141
(as one killed by SIGPIPE), without an error line or a traceback. The console script in a
real shell pipeline, against a real server."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer

from .conftest import Armada
from .servers import job_file, server_config, start

ARMADA = Path(sys.executable).with_name("armada")


def pipeline(tmp_path: Path, address: str, *args: str) -> subprocess.Popen[str]:
    """`armada --url ADDRESS ARGS | head -1` in bash; armada's exit code goes to `code`, its
    stderr to `err`."""
    if shutil.which("bash") is None:
        pytest.skip("bash is needed for a shell pipeline")
    command = " ".join([str(ARMADA), "--url", address, *args])
    script = f'{command} 2>"{tmp_path}/err" | head -1; echo "${{PIPESTATUS[0]}}" >"{tmp_path}/code"'
    return subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen[str], tmp_path: Path) -> tuple[str, int, str]:
    out, _ = process.communicate(timeout=60)
    return out, int((tmp_path / "code").read_text()), (tmp_path / "err").read_text()


def test_watch_into_head(armada: Armada, server: EmbeddedServer, tmp_path: Path) -> None:
    armada.ok("queue", "create", "q")
    (tmp_path / "jobs.yaml").write_text(job_file("q", "s", "true", "true"))
    armada.ok("submit", str(tmp_path / "jobs.yaml"))
    process = pipeline(tmp_path, server.address, "watch", "q", "s")
    assert process.stdout is not None
    first = process.stdout.readline()
    assert " submitted " in first
    # head has gone: the lines of the next events meet a closed pipe.
    with ArmadaClient(server.address) as c:
        c.cancel_job_set("q", "s")
    _, code, err = finish(process, tmp_path)
    assert (code, err) == (141, "")


def test_following_logs_into_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = start(server_config(tmp_path, "local"))
    try:
        armada = Armada(server.address, capsys)
        armada.ok("queue", "create", "q")
        chatty = "for i in $(seq 1 600); do echo line $i; sleep 0.1; done"
        (tmp_path / "jobs.yaml").write_text(job_file("q", "s", chatty))
        [job] = armada.ok("submit", "-q", str(tmp_path / "jobs.yaml")).split()
        process = pipeline(tmp_path, server.address, "logs", "-f", job, "--interval", "0.1")
        out, code, err = finish(process, tmp_path)
        assert out == "line 1\n"
        assert (code, err) == (141, "")
        armada.ok("cancel", "q", "s", job)
    finally:
        server.stop()
