"""Two attempts of a task never run at once, down to the processes: the server shows a run it
ended without a finished time until its executor confirms the processes are gone, and the
task lifecycle submits a new attempt only after that. The earlier attempt's process ignores
SIGTERM (or takes seconds to wind down), so it lives on after the cancellation. Also as
operators run it: two replicas on PostgreSQL, a remote `armada-executor`, the leader
SIGKILLed between the attempts."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from armada_core.api import job_pb2, submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_core.client.lifecycle import TaskIdentity, submit_or_reattach
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, ServerConfig

from ..server.test_task_generations import check_races, one
from .processes import Process, kill_leftovers, wait_until
from .topology import Topology, in_pool, read_records, recorded_spec

pytestmark = pytest.mark.e2e

GRACE = 3
FIRST = TaskIdentity("airflow", "dag/run-1/task/-1", "1", name="task")
RETRY = TaskIdentity("airflow", "dag/run-1/task/-1", "2", name="task")


@pytest.fixture
def client(tmp_path: Path) -> Iterator[ArmadaClient]:
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="local",
        sandbox_dir=str(tmp_path / "pods"),
        database_url=f"sqlite:///{tmp_path / 'armada.db'}",
        nodes=(NodeGroup(1, "4", "8Gi"),),
        scheduling_period=0.1,
        executor_sync_interval=0.2,
        heartbeat_seconds=1,
    )
    with EmbeddedServer(config) as server, ArmadaClient(server.address) as c:
        c.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        yield c


def stubborn(pid_file: Path):  # type: ignore[no-untyped-def]
    """A task's job whose process records its pid, ignores SIGTERM and sleeps."""
    code = (
        "import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"
    )
    spec = {
        "containers": [
            {
                "name": "main",
                "image": "python",
                "command": [sys.executable, "-c", code, str(pid_file)],
                "resources": {
                    "requests": {"cpu": "100m", "memory": "64Mi"},
                    "limits": {"cpu": "100m", "memory": "64Mi"},
                },
            }
        ],
        "terminationGracePeriodSeconds": GRACE,
    }
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
    client: ArmadaClient, tmp_path: Path
) -> None:
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


def test_a_retry_waits_for_the_earlier_attempts_processes(
    client: ArmadaClient, tmp_path: Path
) -> None:
    lines: list[str] = []
    first = submit_or_reattach(
        client, "q", "js", FIRST, stubborn(tmp_path / "pid1"), log=lines.append
    )
    pid = started(tmp_path / "pid1")
    # The retry cancels the first attempt's job and submits only once its process is gone.
    retry = submit_or_reattach(
        client, "q", "js", RETRY, stubborn(tmp_path / "pid2"), log=lines.append
    )
    assert not alive(pid)
    assert client.get_job_status(first.job_ids)[first.job_ids[0]] == submit_pb2.CANCELLED
    assert any("Waiting for the pods of Armada job" in line for line in lines), lines
    started(tmp_path / "pid2")
    # A task killed and retried at once: its job was cancelled just before (as on_kill
    # does), so the next attempt finds it ended, yet still waits for its process.
    client.cancel_jobs("q", "js", retry.job_ids)
    pid2 = started(tmp_path / "pid2")
    third = submit_or_reattach(
        client,
        "q",
        "js",
        TaskIdentity("airflow", "dag/run-1/task/-1", "3", name="task"),
        stubborn(tmp_path / "pid3"),
    )
    assert not alive(pid2)
    assert not third.reattached


def test_a_retry_refused_for_a_stopping_job_waits_for_its_process(
    client: ArmadaClient, tmp_path: Path
) -> None:
    """The earlier attempt's job is in a job set the retry does not look in, cancelled, its
    process still alive: the server refuses the retry's jobs while the run holds its node, and
    the lifecycle waits for the process to be gone before it submits."""
    first = submit_or_reattach(client, "q", "old", FIRST, stubborn(tmp_path / "pid1"))
    pid = started(tmp_path / "pid1")
    client.cancel_jobs("q", "old", first.job_ids)
    lines: list[str] = []
    retry = submit_or_reattach(
        client, "q", "new", RETRY, stubborn(tmp_path / "pid2"), log=lines.append
    )
    assert not alive(pid)
    assert not retry.reattached and retry.job_set_id == "new"
    assert any("Waiting for the pods of Armada job" in line for line in lines), lines
    started(tmp_path / "pid2")


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_two_attempts_released_at_once_on_two_replicas_leave_one_generation(
    processes: Callable[..., Process], tmp_path: Path, postgres_server
) -> None:  # type: ignore[no-untyped-def]
    """Two submitters of one task released together, each through its own replica of one
    PostgreSQL database, round after round: one live generation each round."""
    topology = Topology(processes, tmp_path, postgres_server.new_database())
    clients: list[ArmadaClient] = []
    try:
        clients = [topology.client(topology.add_replica(name)) for name in ("a", "b")]
        clients[0].create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        check_races(clients, one, 1)
    finally:
        for c in clients:
            c.close()
        topology.close()


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_a_retry_waits_across_replicas_a_remote_executor_and_a_killed_leader(
    processes: Callable[..., Process], tmp_path: Path, postgres_server
) -> None:  # type: ignore[no-untyped-def]
    """The first attempt runs on a remote local executor and takes 4 s to stop on SIGTERM;
    the leader is SIGKILLed; the retry, through the surviving replica, starts only after
    the first attempt's process recorded its end."""
    topology = Topology(
        processes,
        tmp_path,
        postgres_server.new_database(),
        scheduling_period=0.2,
        executor_sync_interval=0.2,
        lease_timeout=4,
    )
    try:
        topology.add_replica("a")
        leader = topology.leader()
        topology.add_replica("b")
        topology.add_executor("e1", "local", "cpu", "1x4x8Gi")
        record = tmp_path / "records.log"
        spec = recorded_spec(record, 120, stop_delay=4)

        def build(client_id: str) -> list[submit_pb2.JobSubmitRequestItem]:
            return [job_item(spec, client_id=client_id, annotations=in_pool("cpu"))]

        with topology.client() as client:
            client.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
            first = submit_or_reattach(client, "q", "js", FIRST, build)
        wait_until(
            lambda: any(life.job_id in first.job_ids for life in read_records(record)[0]),
            60,
            "the first attempt's process to start",
        )
        leader.process.kill()
        survivor = topology.leader()
        assert survivor is not leader
        lines: list[str] = []
        with topology.client(survivor) as client:
            retry = submit_or_reattach(client, "q", "js", RETRY, build, log=lines.append)
            submitted_at = time.time_ns()
            assert client.get_job_status(first.job_ids)[first.job_ids[0]] == submit_pb2.CANCELLED
        [old] = [life for life in read_records(record)[0] if life.job_id in first.job_ids]
        assert old.end is not None and old.end <= submitted_at, (old, lines)
        assert any("Waiting for the pods of Armada job" in line for line in lines), lines
        wait_until(
            lambda: any(life.job_id in retry.job_ids for life in read_records(record)[0]),
            60,
            "the retry's process to start",
        )
    finally:
        topology.close()
        for process in reversed(topology.processes):
            process.stop()
        kill_leftovers(str(tmp_path / "e1-pods"))
