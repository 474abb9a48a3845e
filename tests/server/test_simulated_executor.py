"""The simulated executor on a real server: runs that last their annotated time, one node's
room shared in turn, stops, and a job whose duration annotation is not a number of seconds.

Each run is a timer, not a task (executors/simulated.py): these check what a run's timer
decides against what the server then shows, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from armada_core.api import executor_pb2, submit_pb2
from armada_core.client import ArmadaClient
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup
from armada_server.executors.nodes import virtual_nodes
from armada_server.executors.simulated import DURATION, SimulatedBackend

from .test_metrics import job
from .test_preemption_events import in_state, one_node_config, wait_until


@pytest.fixture
def one_node(database_url: str) -> Iterator[ArmadaClient]:
    """One simulated node of 2 CPUs and 4Gi (no HTTP port: tests run side by side)."""
    config = one_node_config(database_url)
    with EmbeddedServer(config) as server, ArmadaClient(server.address) as armada:
        armada.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
        yield armada


def test_runs_take_the_node_in_turn_and_a_bad_duration_fails_only_its_job(
    one_node: ArmadaClient,
) -> None:
    armada = one_node
    [first] = armada.submit_jobs("q", "s", [job(cpu="2", seconds="0.5")])
    bad = job(cpu="2", seconds="0.5")
    bad.annotations[DURATION] = "soon"
    [broken] = armada.submit_jobs("q", "s", [bad])
    [second] = armada.submit_jobs("q", "s", [job(cpu="2", seconds="0.5")])
    for job_id in (first, second):
        wait_until(in_state(armada, job_id, submit_pb2.SUCCEEDED), "each whole-node job to end")
    wait_until(in_state(armada, broken, submit_pb2.FAILED), "the job of a bad duration to fail")
    error = armada.get_job_errors([broken])[broken]
    assert f"{DURATION} must be a number of seconds (0 or more), got 'soon'" in error, error
    [running] = armada.submit_jobs("q", "s", [job(cpu="2", seconds="600")])
    wait_until(in_state(armada, running, submit_pb2.RUNNING), "a long job to run")
    assert armada.cancel_jobs("q", "s", [running]) == [running]
    [after] = armada.submit_jobs("q", "s", [job(cpu="2", seconds="0")])
    wait_until(in_state(armada, running, submit_pb2.CANCELLED), "the long job to be cancelled")
    wait_until(in_state(armada, after, submit_pb2.SUCCEEDED), "the node to be free again")


class Timers:
    """A virtual clock's timers: fired by the test, in the order they were set."""

    def __init__(self) -> None:
        self.set: list[tuple[float, Callable[[], None]]] = []

    def __call__(self, seconds: float, callback: Callable[[], None]) -> Timers:
        self.set.append((seconds, callback))
        return self

    def cancel(self) -> None:
        pass


async def test_the_runs_held_are_those_started_and_not_ended_waiting_or_running() -> None:
    """What the executor tells the server it holds, at each turn of its runs' lives: waiting
    for room, running, ended, stopped while waiting or running, never started."""
    timers = Timers()
    backend = SimulatedBackend(virtual_nodes([NodeGroup(1, "1", "1Gi")], "sim"), later=timers)
    news: list[executor_pb2.RunUpdate] = []

    def lease(run_id: str, seconds: str = "5") -> executor_pb2.Lease:
        job = submit_pb2.Job(id=f"job-{run_id}", annotations={DURATION: seconds})
        job.scheduling_resource_requirements.requests["cpu"].string = "1"
        return executor_pb2.Lease(run_id=run_id, node="sim-0", job=job)

    for run_id in ("a", "b", "c"):  # one CPU: a runs, b and c wait for it
        backend.start(lease(run_id), news.append)
    backend.start(lease("bad", seconds="soon"), news.append)  # fails at once
    backend.start(lease("a"), news.append)  # a lease it holds already: nothing new
    assert backend.held() == {"a", "b", "c"}
    timers.set[0][1]()  # a's time is up: b takes the node
    assert backend.held() == {"b", "c"}
    backend.stop("c", preempt=False)  # waiting
    assert backend.held() == {"b"}
    backend.stop("b", preempt=True)  # running
    assert backend.held() == set()
    backend.start(lease("d"), news.append)
    assert backend.held() == {"d"}
    await backend.close()
    assert backend.held() == set()
    assert [u.WhichOneof("update") for u in news if u.run_id == "bad"] == ["failed"]
