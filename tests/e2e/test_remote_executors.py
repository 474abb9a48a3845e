"""Remote executors are first class: logs, cordons and failover with real processes.

`armada-server --executor none` replicas (two on PostgreSQL, one on SQLite) and an
`armada-executor --kind local` process that syncs with all of them. Logs of its jobs are read
through every replica (the replica asks the executor over ExecutorControl), also after the job
has ended and while following with `armada logs -f`; cordoning its node stops placements
there; and it keeps its jobs when the replica it syncs with is SIGKILLed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from armada_core.api import job_pb2, submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_server.executors.simulated import DURATION

from .processes import BIN, Process, wait_until
from .topology import Topology, resources

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LEASE_TIMEOUT = 4
SETTINGS = {"scheduling_period": 0.2, "executor_sync_interval": 0.2, "lease_timeout": LEASE_TIMEOUT}


@pytest.fixture
def cluster(tmp_path: Path, processes: Callable[..., Process]) -> Iterator[Callable[..., Topology]]:
    """Builds a topology (replicas: two on PostgreSQL, one on SQLite); every process it
    starts is stopped at the end."""

    def build(database_url: str, *, replicas: int | None = None) -> Topology:
        topology = Topology(processes, tmp_path, database_url, **SETTINGS)
        count = replicas or (2 if database_url.startswith("postgresql") else 1)
        for i in range(count):
            topology.add_replica("abcdefgh"[i])
        with topology.client() as client:
            client.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        return topology

    yield build


def shell(script: str, name: str = "main", cpu: str = "100m") -> dict:
    return {
        "name": name,
        "image": "busybox",
        "command": ["sh", "-c", script],
        "resources": resources(cpu),
    }


def state(client: ArmadaClient, job_id: str) -> int:
    return client.get_job_status([job_id])[job_id]


def wait_state(client: ArmadaClient, job_id: str, wanted: int, timeout: float = 60) -> None:
    wait_until(
        lambda: state(client, job_id) == wanted,
        timeout,
        f"job {job_id} to be {submit_pb2.JobState.Name(wanted)}",
    )


def texts(client: ArmadaClient, job_id: str, **options: object) -> list[str]:
    return [line.line for line in client.logs(job_id, **options)]


def test_logs_of_a_remote_executor_through_every_replica(
    cluster: Callable[..., Topology], database_url: str, tmp_path: Path
) -> None:
    topology = cluster(database_url)
    topology.add_executor("e1", "local", "default", "1x4x4Gi")
    go = tmp_path / "go"
    wait_for_go = f"while [ ! -e {go} ]; do sleep 0.05; done"
    spec = {
        "containers": [
            shell(f"for i in 1 2 3 4 5; do echo line $$i; done; {wait_for_go}; echo last"),
            shell(f"echo side-out; echo side-err >&2; {wait_for_go}", name="side"),
        ]
    }
    clients = [topology.client(r) for r in topology.alive()]
    [job] = clients[0].submit_jobs("q", "logs", [job_item(spec)])
    wait_state(clients[0], job, submit_pb2.RUNNING)
    wait_until(lambda: len(texts(clients[0], job)) == 5, 60, "the first five lines")

    for client in clients:  # every replica asks the executor itself
        lines = client.logs(job)
        assert [line.line for line in lines] == [f"line {i}" for i in range(1, 6)]
        assert texts(client, job, tail_lines=2) == ["line 4", "line 5"]
        assert texts(client, job, since_time=lines[1].timestamp) == ["line 3", "line 4", "line 5"]
        assert texts(client, job, since_time=lines[1].timestamp, tail_lines=1) == ["line 5"]
        assert texts(client, job, container="side") == ["side-out", "side-err"]

    # Following through the CLI, on the last replica, until the job has finished.
    follow = topology.start(
        "follow",
        str(BIN / "armada"),
        "--url",
        topology.alive()[-1].address,
        "logs",
        "-f",
        job,
        "--interval",
        "0.1",
    )
    follow.wait_for("line 5")
    go.touch()
    assert follow.popen.wait(60) == 0
    assert follow.output().splitlines() == [*(f"line {i}" for i in range(1, 6)), "last"]
    wait_state(clients[0], job, submit_pb2.SUCCEEDED)

    for client in clients:  # the run has ended: the executor still has the log
        assert texts(client, job)[-2:] == ["line 5", "last"]
        assert texts(client, job, tail_lines=1) == ["last"]
    for client in clients:
        client.close()


def test_cordoning_a_remote_executors_node(
    cluster: Callable[..., Topology], database_url: str
) -> None:
    topology = cluster(database_url)
    topology.add_executor("e1", "local", "default", "1x1x1Gi", "1x4x4Gi")  # e1-0, e1-1
    address = topology.alive()[0].address

    def armada(*argv: str) -> Process:
        process = topology.start(
            f"armada-{argv[0]}-{argv[1]}", str(BIN / "armada"), "--url", address, *argv
        )
        assert process.popen.wait(60) == 0, process.output()
        return process

    assert armada("node", "cordon", "e1-1").output() == "Cordoned node e1-1\n"
    with topology.client() as client:
        # Three CPUs fit only on the cordoned node: the job stays queued, saying why.
        [job] = client.submit_jobs(
            "q", "cordon", [job_item({"containers": [shell("true", cpu="3")]})]
        )
        wait_until(
            lambda: client.get_job_details([job])[job].scheduling_reason,
            60,
            "the scheduler to say why the job waits",
        )
        assert state(client, job) == submit_pb2.QUEUED
        assert client.get_job_details([job], expand_job_run=True)[job].job_runs == []
        # A job that fits the other node still runs.
        [small] = client.submit_jobs(
            "q", "cordon", [job_item({"containers": [shell("true", cpu="500m")]})]
        )
        wait_state(client, small, submit_pb2.SUCCEEDED)
        assert state(client, job) == submit_pb2.QUEUED

        armada("node", "uncordon", "e1/e1-1")
        wait_state(client, job, submit_pb2.SUCCEEDED)
        [run] = client.get_job_details([job], expand_job_run=True)[job].job_runs
        assert (run.cluster, run.node) == ("e1", "e1-1")


@pytest.mark.postgres
def test_an_executor_keeps_its_jobs_when_its_replica_is_killed(
    cluster: Callable[..., Topology], postgres_server, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    topology = cluster(postgres_server.new_database(), replicas=2)
    first, second = topology.alive()
    executor = topology.add_executor("e1", "local", "default", "1x4x4Gi")  # syncs with first
    go = tmp_path / "go"
    spec = {"containers": [shell(f"while [ ! -e {go} ]; do sleep 0.1; done")]}
    with topology.client(second) as client:
        jobs = client.submit_jobs("q", "failover", [job_item(spec)] * 5)
        for job in jobs:
            wait_state(client, job, submit_pb2.RUNNING)
        first.process.kill()
        executor.process.wait_for("fails over to server address 2 of 2")
        # Work still reaches the executor through the other replica...
        [canary] = client.submit_jobs("q", "failover", [job_item({"containers": [shell("true")]})])
        wait_state(client, canary, submit_pb2.SUCCEEDED)
        # ...and its jobs outlive the lease timeout: every sync renewed them.
        time.sleep(LEASE_TIMEOUT + 1)
        details = client.get_job_details(jobs, expand_job_run=True)
        for job in jobs:
            assert [(r.cluster, r.state) for r in details[job].job_runs] == [
                ("e1", job_pb2.RUN_STATE_RUNNING)
            ], topology.problems()
        go.touch()
        for job in jobs:
            wait_state(client, job, submit_pb2.SUCCEEDED)
        details = client.get_job_details(jobs, expand_job_run=True)
        assert all(len(details[job].job_runs) == 1 for job in jobs)


def test_a_remote_executor_takes_leases_beyond_grpcs_default_message_size(
    cluster: Callable[..., Topology], database_url: str
) -> None:
    """Eight jobs of 0.9 MB leased together go out in one sync response of over 7 MB: the
    executor's channel receives what its syncs say it does (max_response_bytes)."""
    topology = cluster(database_url)
    topology.add_executor("e1", "simulated", "default", "1x64x256Gi")
    big = {"containers": [shell("true") | {"args": ["x" * 900_000]}]}
    with topology.client() as client:
        ids = client.submit_jobs(
            "q", "big", [job_item(big, annotations={DURATION: "0"}) for _ in range(8)]
        )
        for job_id in ids:
            wait_state(client, job_id, submit_pb2.SUCCEEDED)
