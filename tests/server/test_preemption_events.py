"""The preempted event names the job a preemption made room for.

A real server with its in-process simulated executor, on each database backend, driven
through the client; and the choice among several jobs placed in a victim's room, on the
scheduler's own result types.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from armada_core import scheduling as s
from armada_core.api import event_pb2, submit_pb2
from armada_core.client import ArmadaClient, job_item
from armada_server.app import EmbeddedServer
from armada_server.config import NodeGroup, PriorityClassConfig, ServerConfig
from armada_server.executors.simulated import DURATION
from armada_server.scheduling.loop import made_room_for

CLASSES = (
    PriorityClassConfig("low", 0, preemptible=True),
    PriorityClassConfig("high", 10, preemptible=False),
)


def one_node_config(database_url: str, *, http_port: int | None = None) -> ServerConfig:
    """A server with its simulated executor of one node of 2 CPUs and 4Gi, CLASSES, and
    cycles and syncs a few times a second."""
    return ServerConfig(
        port=0,
        http_port=http_port,
        executor="simulated",
        database_url=database_url,
        nodes=(NodeGroup(1, "2", "4Gi"),),
        priority_classes=CLASSES,
        default_priority_class="low",
        scheduling_period=0.1,
        executor_sync_interval=0.2,
    )


@pytest.fixture
def client(database_url: str) -> Iterator[ArmadaClient]:
    """One simulated node of 2 CPUs."""
    config = one_node_config(database_url)
    with EmbeddedServer(config) as server, ArmadaClient(server.address) as armada:
        armada.create_queue(submit_pb2.Queue(name="batch", priority_factor=1))
        armada.create_queue(submit_pb2.Queue(name="urgent", priority_factor=1))
        yield armada


def job(priority_class: str, cpu: str = "2") -> submit_pb2.JobSubmitRequestItem:
    return job_item(
        {
            "containers": [
                {
                    "name": "main",
                    "command": ["sleep", "600"],
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                }
            ]
        },
        priority_class=priority_class,
        annotations={DURATION: "600"},
    )


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def in_state(client: ArmadaClient, job_id: str, state: int) -> Callable[[], bool]:
    return lambda: client.get_job_status([job_id])[job_id] == state


def preempted_event(
    client: ArmadaClient, queue: str, job_set: str, job_id: str
) -> event_pb2.JobPreemptedEvent:
    [event] = [
        m.message.preempted
        for m in client.get_job_set_events(queue, job_set)
        if m.message.WhichOneof("events") == "preempted" and m.message.preempted.job_id == job_id
    ]
    return event


def test_the_preempted_event_names_the_job_placed_in_its_room(client: ArmadaClient) -> None:
    [victim] = client.submit_jobs("batch", "fill", [job("low")])
    wait_until(in_state(client, victim, submit_pb2.RUNNING), "the low job to run")
    [urgent] = client.submit_jobs("urgent", "now", [job("high")])
    wait_until(in_state(client, victim, submit_pb2.PREEMPTED), "the low job's preemption")
    wait_until(in_state(client, urgent, submit_pb2.RUNNING), "the urgent job to run")
    event = preempted_event(client, "batch", "fill", victim)
    assert event.preempting_job_id == urgent
    assert event.requestor == "scheduler"


def test_a_manual_preemption_names_no_job(client: ArmadaClient) -> None:
    [urgent] = client.submit_jobs("urgent", "now", [job("high")])
    wait_until(in_state(client, urgent, submit_pb2.RUNNING), "the urgent job to run")
    # Waits for the node: the running job's class cannot be preempted by the scheduler.
    [waiting] = client.submit_jobs("batch", "wait", [job("low")])
    assert client.preempt_jobs("urgent", "now", [urgent], reason="maintenance") == {urgent: ""}
    wait_until(in_state(client, urgent, submit_pb2.PREEMPTED), "the manual preemption")
    wait_until(in_state(client, waiting, submit_pb2.RUNNING), "the waiting job to run")
    assert preempted_event(client, "urgent", "now", urgent).preempting_job_id == ""


# --- which job a preemption made room for -------------------------------------------------


def snapshot(*jobs: s.Job) -> s.Snapshot:
    return s.Snapshot(
        queues=(s.Queue("a"), s.Queue("b")),
        priority_classes=(
            s.PriorityClass("low", 0, preemptible=True),
            s.PriorityClass("mid", 5),
            s.PriorityClass("high", 10),
        ),
        nodes=(s.Node("e/n1", s.Resources(cpu=4000)), s.Node("e/n2", s.Resources(cpu=4000))),
        jobs=jobs,
    )


def queued(job_id: str, priority_class: str, submitted: float) -> s.Job:
    return s.Job(job_id, "b", priority_class, s.Resources(cpu=1000), submit_time=submitted)


def running(job_id: str, node: str) -> s.Job:
    return s.Job(
        job_id, "a", "low", s.Resources(cpu=4000), submit_time=0.0, node=node, start_time=1.0
    )


def test_of_several_jobs_placed_in_the_room_the_most_urgent_is_named() -> None:
    jobs = (
        running("v1", "e/n1"),
        running("v2", "e/n2"),
        queued("j-mid", "mid", 1.0),
        queued("j-high-late", "high", 9.0),
        queued("j-high-early", "high", 5.0),
        queued("j-z", "mid", 2.0),
        queued("j-y", "mid", 2.0),
        queued("j-x", "mid", 3.0),
    )
    result = s.SchedulingResult(
        scheduled={
            "j-mid": "e/n1",
            "j-high-late": "e/n1",
            "j-high-early": "e/n1",
            "j-z": "e/n2",
            "j-y": "e/n2",
            "j-x": "e/n2",
        },
        preempted={"v1", "v2"},
    )
    # n1: the highest class wins over an earlier submission; of the same class, the
    # earliest. n2: the same class and submission time: the lowest id.
    assert made_room_for(snapshot(*jobs), result) == {"v1": "j-high-early", "v2": "j-y"}


def test_a_preemption_that_placed_nothing_on_its_node_names_no_job() -> None:
    jobs = (running("v1", "e/n1"), running("v2", "e/n2"), queued("j", "high", 1.0))
    result = s.SchedulingResult(scheduled={"j": "e/n1"}, preempted={"v1", "v2"})
    assert made_room_for(snapshot(*jobs), result) == {"v1": "j"}
    assert made_room_for(snapshot(*jobs), s.SchedulingResult(preempted={"v2"})) == {}
