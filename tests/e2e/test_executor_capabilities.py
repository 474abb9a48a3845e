"""Executor capabilities with a remote executor: `armada-server --executor none` and an
`armada-executor --kind local` process. The server has no executor of its own to ask, so
only what the executor declared over the executor protocol can refuse a job it would have
silently run without its volumes.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select

from armada_core.api import submit_pb2
from armada_core.client import ArmadaClient, InvalidArgument, job_item
from armada_core.jobs import JobState
from armada_core.jobs import annotations as ann
from armada_server.storage import schema as t

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BIN = Path(sys.executable).parent
LISTENING = re.compile(r"listening on (\S+):(\d+)")


class Process:
    """A command whose output goes to a file the test reads while it runs."""

    def __init__(self, name: str, argv: list[str], log_dir: Path) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        self._out = self.log.open("wb")
        self.popen = subprocess.Popen(
            argv, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=log_dir
        )

    def wait_for(self, pattern: re.Pattern[str], timeout: float = 120) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            output = self.log.read_text(errors="replace")
            match = pattern.search(output)
            if match:
                return match
            assert self.popen.poll() is None, f"{self.name} exited:\n{output}"
            assert time.monotonic() < deadline, f"{self.name} is silent:\n{output}"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(30)
        self._out.close()


def pod(*command: str, **extra: object) -> dict:
    return {
        "containers": [
            {
                "name": "main",
                "command": list(command),
                "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}},
            }
        ],
        **extra,
    }


def declared(database_url: str, executor: str, timeout: float = 60) -> bytes:
    """The executor's stored declaration, once its first sync has stored it."""
    engine = create_engine(database_url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            with engine.connect() as conn:
                found = conn.execute(
                    select(t.executors.c.capabilities).where(t.executors.c.id == executor)
                ).scalar()
            if found is not None:
                return found
            assert time.monotonic() < deadline, f"{executor} never declared its capabilities"
            time.sleep(0.1)
    finally:
        engine.dispose()


def test_a_remote_local_executor_declares_what_it_cannot_honour(
    processes: Callable[..., Process], tmp_path: Path, database_url: str
) -> None:
    server = processes(
        "server",
        str(BIN / "armada-server"),
        "--port",
        "0",
        "--http-port",
        "0",
        "--executor",
        "none",
        "--database-url",
        database_url,
        "--scheduling-period",
        "0.2",
    )
    host, port = server.wait_for(LISTENING).groups()
    address = f"{host}:{port}"
    executor = processes(
        "e1",
        str(BIN / "armada-executor"),
        "--server",
        address,
        "--id",
        "e1",
        "--pool",
        "cpu",
        "--kind",
        "local",
        "--nodes",
        "1x2x2Gi",
        "--interval",
        "0.2",
        "--sandbox-dir",
        str(tmp_path / "e1-pods"),
    )
    executor.wait_for(re.compile("syncing with"))
    assert declared(database_url, "e1")
    volume = pod("true", volumes=[{"name": "data", "emptyDir": {}}])
    volume["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    with ArmadaClient(address) as client:
        client.create_queue(submit_pb2.Queue(name="q"))
        with pytest.raises(InvalidArgument) as raised:
            client.submit_jobs("q", "s", [job_item(volume, annotations={ann.POOL: "cpu"})])
        message = str(raised.value)
        assert (
            "job_request_items[0].pod_specs[0].volumes: no executor of pool 'cpu' can run "
            "this job: executor 'e1' cannot honour volumes, containers[0].volumeMounts" in message
        ), message
        with pytest.raises(InvalidArgument, match="no executor of any pool"):
            client.submit_jobs("q", "s", [job_item(volume)])
        ids = client.submit_jobs("q", "ok", [job_item(pod("true"), annotations={ann.POOL: "cpu"})])
        results = client.wait_for_jobs("q", "ok", ids, timeout=120)
        assert {(r.state, r.cluster) for r in results.values()} == {(JobState.SUCCEEDED, "e1")}
