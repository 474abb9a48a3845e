"""Two attempts of a task never run at once, down to the processes: the server shows a run it
ended without a finished time until its executor confirms the processes are gone, and the
task lifecycle submits a new attempt only after that. The earlier attempt's process ignores
SIGTERM, so it lives on for its whole grace period after the cancellation."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from armada_core.api import job_pb2, submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_core.client.lifecycle import TaskIdentity, submit_or_reattach
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig

pytestmark = pytest.mark.e2e

GRACE = 3
FIRST = TaskIdentity("airflow", "dag/run-1/task/-1", "1", name="task")
RETRY = TaskIdentity("airflow", "dag/run-1/task/-1", "2", name="task")


@pytest.fixture
def client(tmp_path: Path) -> Iterator[ArmadaClient]:
    config = ServerConfig(
        port=0, http_port=None, executor="local", sandbox_dir=str(tmp_path / "pods"),
        database_url=f"sqlite:///{tmp_path / 'armada.db'}", nodes=(NodeGroup(1, "4", "8Gi"),),
        scheduling_period=0.1, executor_sync_interval=0.2, heartbeat_seconds=1)
    with EmbeddedServer(config) as server, ArmadaClient(server.address) as c:
        c.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        yield c


def stubborn(pid_file: Path):  # type: ignore[no-untyped-def]
    """A task's job whose process records its pid, ignores SIGTERM and sleeps."""
    code = ("import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)")
    spec = {"containers": [{"name": "main", "image": "python",
                            "command": [sys.executable, "-c", code, str(pid_file)],
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                          "limits": {"cpu": "100m", "memory": "64Mi"}}}],
            "terminationGracePeriodSeconds": GRACE}
    return lambda client_id: [job_item(spec, client_id=client_id)]


def started(pid_file: Path) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if pid_file.exists() and pid_file.read_text():
            return int(pid_file.read_text())
        time.sleep(0.05)
    raise AssertionError(f"the job never started ({pid_file} not written)")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_cancelled_run_is_unfinished_until_its_processes_are_gone(
        client: ArmadaClient, tmp_path: Path) -> None:
    [job_id] = client.submit_jobs("q", "js", stubborn(tmp_path / "pid")(""))
    pid = started(tmp_path / "pid")
    client.cancel_jobs("q", "js", [job_id])
    assert client.get_job_status([job_id])[job_id] == submit_pb2.CANCELLED
    [run] = client.get_job_details([job_id], expand_job_run=True)[job_id].job_runs
    assert run.state == job_pb2.RUN_STATE_CANCELLED
    assert alive(pid) and not run.HasField("finished_ts")
    assert not client.get_job_run_details([run.run_id])[run.run_id].HasField("finished_ts")
    deadline = time.monotonic() + GRACE + 30
    while not run.HasField("finished_ts"):
        assert time.monotonic() < deadline, "the run never finished"
        time.sleep(0.1)
        [run] = client.get_job_details([job_id], expand_job_run=True)[job_id].job_runs
    assert not alive(pid)
    assert client.get_job_run_details([run.run_id])[run.run_id].HasField("finished_ts")


def test_a_retry_waits_for_the_earlier_attempts_processes(client: ArmadaClient,
                                                          tmp_path: Path) -> None:
    lines: list[str] = []
    first = submit_or_reattach(client, "q", "js", FIRST, stubborn(tmp_path / "pid1"),
                               log=lines.append)
    pid = started(tmp_path / "pid1")
    # The retry cancels the first attempt's job and submits only once its process is gone.
    retry = submit_or_reattach(client, "q", "js", RETRY, stubborn(tmp_path / "pid2"),
                               log=lines.append)
    assert not alive(pid)
    assert client.get_job_status(first.job_ids)[first.job_ids[0]] == submit_pb2.CANCELLED
    assert any("Waiting for the pods of Armada job" in line for line in lines), lines
    started(tmp_path / "pid2")
    # A task killed and retried at once: its job was cancelled just before (as on_kill
    # does), so the next attempt finds it ended, yet still waits for its process.
    client.cancel_jobs("q", "js", retry.job_ids)
    pid2 = started(tmp_path / "pid2")
    third = submit_or_reattach(client, "q", "js",
                               TaskIdentity("airflow", "dag/run-1/task/-1", "3", name="task"),
                               stubborn(tmp_path / "pid3"))
    assert not alive(pid2)
    assert not third.reattached
