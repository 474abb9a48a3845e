"""One live generation per task and queue, on SQLite and PostgreSQL: the server refuses, in the
transaction that would store them, jobs of a task that has live jobs of another attempt or
generation, naming the live ones; a gang's members are one generation; a run cancelled but
not yet confirmed gone keeps its task's generation live; two submitters released at once
(storage, and the task lifecycle over gRPC) leave exactly one live generation."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import grpc
import pytest

from armada_core.api import executor_pb2, submit_pb2
from armada_core.client import ArmadaClient, gang_items, job_item
from armada_core.client.lifecycle import Submission, TaskIdentity, submit_or_reattach
from armada_core.jobs import JobState
from armada_core.jobs import annotations as ann
from armada_core.jobs.tasks import LIVE_GENERATION_METADATA, LiveGeneration
from armada_server.app import EmbeddedServer
from armada_server.errors import InvalidArgument
from armada_server.storage import Storage
from armada_server.storage.database import open_database
from armada_server.storage.task_generations import LiveGenerationExists

from ..jobs.factories import T0, container, item
from .conftest import Stubs

NODE = executor_pb2.Node(name="n1", allocatable={"cpu": "8", "memory": "16Gi"})
ROUNDS = 10


def task_item(
    task: str, attempt: str, generation: str = "0", **annotations: str
) -> submit_pb2.JobSubmitRequestItem:
    stamps = {ann.TASK: task, ann.TASK_ATTEMPT: attempt, ann.TASK_GENERATION: generation}
    return item(annotations=stamps | annotations)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(database_url: str, clock: Clock) -> Iterator[Storage]:
    engine = open_database(database_url)
    store = Storage(engine, clock=clock)
    for name in ("q", "other"):
        store.queues.create_queue(submit_pb2.Queue(name=name, priority_factor=1))
    sync(store, clock, [])
    yield store
    engine.dispose()


def sync(store: Storage, clock: Clock, held: list[str]) -> executor_pb2.SyncResponse:
    """One sync of executor e1, holding the runs `held`."""
    return store.executors.executor_sync(
        executor_pb2.SyncRequest(executor_id="e1", pool="default", nodes=[NODE], run_ids=held),
        now=clock.now,
    )


def submit(store: Storage, *items: submit_pb2.JobSubmitRequestItem, queue: str = "q") -> list[str]:
    return store.submissions.submit(queue, "s", items, owner="test")


def refused(store: Storage, *items: submit_pb2.JobSubmitRequestItem) -> LiveGeneration:
    with pytest.raises(LiveGenerationExists) as e:
        submit(store, *items)
    return e.value.live


def test_a_second_attempt_is_refused_with_the_live_jobs(store: Storage) -> None:
    [first] = submit(store, task_item("dag/run/t/-1", "1"))
    live = refused(store, task_item("dag/run/t/-1", "2"))
    assert live == LiveGeneration("dag/run/t/-1", "s", (first,), "1", "0")
    # a new generation of the same attempt is a rival too, and nothing was stored
    assert refused(store, task_item("dag/run/t/-1", "1", "1")).job_ids == (first,)
    assert store.job_reads.count_jobs_by_queue_and_state() == {("q", JobState.QUEUED): 1}
    # other tasks, other queues and jobs without a task are not its rivals
    submit(store, task_item("dag/run/u/-1", "2"))
    submit(store, task_item("dag/run/t/-1", "2"), queue="other")
    submit(store, item(), item())
    # once the live job ended, the next generation is accepted
    store.submissions.cancel("q", "s", [first])
    submit(store, task_item("dag/run/t/-1", "2"))


def test_a_gangs_members_are_one_generation(store: Storage) -> None:
    gang = {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "3"}
    members = submit(store, *[task_item("flow/step", "run-1", **gang) for _ in range(2)])
    # the third member in a request of its own, as a separate submitter would send it
    members += submit(store, task_item("flow/step", "run-1", **gang))
    live = refused(store, task_item("flow/step", "run-2"))
    assert set(live.job_ids) == set(members) and len(live.job_ids) == 3


def test_one_request_is_one_generation_of_each_task(store: Storage) -> None:
    with pytest.raises(InvalidArgument, match=r"job_request_items\[1\]\.annotations.*item 0"):
        submit(store, task_item("t", "1"), task_item("t", "2"))
    with pytest.raises(InvalidArgument, match=r"job_request_items\[0\].*at most 512"):
        submit(store, task_item("t" * 513, "1"))


def test_a_cancelled_run_not_yet_gone_keeps_its_generation_live(
    store: Storage, clock: Clock
) -> None:
    [first] = submit(store, task_item("t", "1"))
    leases = store.scheduling_writes.apply_schedule(
        scheduled={first: ("e1", "n1", "default")},
        preempted=(),
        failed={},
        reasons={},
        seen={first: 0},
        now=clock.now,
    )
    assert leases == 1
    [run] = [lease.run_id for lease in sync(store, clock, []).leases]
    sync(store, clock, [run])
    store.submissions.cancel("q", "s", [first])
    assert store.job_reads.job_states([first]) == {first: JobState.CANCELLED}
    # cancelled, but its executor still holds the run: the task has a live generation
    assert refused(store, task_item("t", "2")).job_ids == (first,)
    clock.now += timedelta(seconds=5)
    sync(store, clock, [run])
    assert refused(store, task_item("t", "2")).job_ids == (first,)
    # the executor confirms the run is gone: a new generation is accepted
    sync(store, clock, [])
    submit(store, task_item("t", "2"))


def test_a_cancelled_runs_hold_ends_with_its_grace(store: Storage, clock: Clock) -> None:
    """An executor that never confirms (gone silent): the run holds its node for its grace
    period and the release slack, then the task may start again."""
    [first] = submit(store, task_item("t", "1"))
    store.scheduling_writes.apply_schedule(
        scheduled={first: ("e1", "n1", "default")},
        preempted=(),
        failed={},
        reasons={},
        seen={first: 0},
        now=clock.now,
    )
    store.submissions.cancel("q", "s", [first])
    clock.now += timedelta(seconds=30)  # the default grace (1 s) and slack (10 s) are over
    submit(store, task_item("t", "2"))


def test_two_submitters_at_once_store_one_generation(store: Storage) -> None:
    """Released together through a barrier, round after round: one wins, the other is
    refused with the winner's jobs (the transaction, not the caller, decides)."""
    for n in range(ROUNDS):
        barrier = threading.Barrier(2)

        def attempt(
            name: str, task: str = f"t{n}", barrier: threading.Barrier = barrier
        ) -> list[str] | LiveGeneration:
            barrier.wait()
            try:
                return submit(store, task_item(task, name), task_item(task, name))
            except LiveGenerationExists as e:
                return e.live

        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(attempt, ["1", "2"]))
        stored = [a for a in answers if isinstance(a, list)]
        lost = [a for a in answers if isinstance(a, LiveGeneration)]
        assert len(stored) == 1 and len(lost) == 1, (n, answers)
        assert sorted(lost[0].job_ids) == sorted(stored[0])


def test_the_refusal_over_grpc_carries_the_live_generation(api: Stubs, queue: str) -> None:
    """What every client sees: ALREADY_EXISTS and a message naming the live jobs; the task
    lifecycle reads them from the trailing metadata."""
    request = submit_pb2.JobSubmitRequest(
        queue=queue, job_set_id="a", job_request_items=[task_item("t", "1")]
    )
    [first] = api.submit.SubmitJobs(request).job_response_items
    request = submit_pb2.JobSubmitRequest(
        queue=queue, job_set_id="b", job_request_items=[task_item("t", "2")]
    )
    with pytest.raises(grpc.RpcError) as e:
        api.submit.SubmitJobs(request)
    error: Any = e.value
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS
    assert first.job_id in error.details() and "job set 'a'" in error.details()
    [found] = [m.value for m in error.trailing_metadata() if m.key == LIVE_GENERATION_METADATA]
    assert LiveGeneration.decode(found) == LiveGeneration("t", "a", (first.job_id,), "1", "0")


# --- the task lifecycle, two submitters released at once -------------------------------------


def one(client_id: str) -> list[submit_pb2.JobSubmitRequestItem]:
    return [job_item({"containers": [container(cpu="100m", memory="64Mi")]}, client_id=client_id)]


def gang(client_id: str) -> list[submit_pb2.JobSubmitRequestItem]:
    pod = {"containers": [container(cpu="100m", memory="64Mi")]}
    return gang_items(pod, replicas=3, client_id=client_id)


def race(clients: list[ArmadaClient], task: str, build: Callable[[str], Any]) -> list[Submission]:
    """Attempts 1 and 2 of `task`, each through its own client, released together."""
    barrier = threading.Barrier(len(clients))

    def attempt(k: int) -> Submission:
        identity = TaskIdentity("airflow", task, str(k + 1), name="task")
        barrier.wait()
        return submit_or_reattach(clients[k], "q", "js", identity, build, cancel_wait=60)

    with ThreadPoolExecutor(len(clients)) as pool:
        return list(pool.map(attempt, range(len(clients))))


def live_generations(client: ArmadaClient, task: str) -> dict[tuple[str, str], list[str]]:
    """The task's live jobs by (attempt, generation), as the server shows them."""
    uri = TaskIdentity("airflow", task, "").external_job_uri
    states = client.get_job_status_by_external_uri("q", "js", uri)
    details = client.get_job_details(list(states), expand_job_spec=True)
    out: dict[tuple[str, str], list[str]] = {}
    for job_id, state in states.items():
        if state in (submit_pb2.QUEUED, submit_pb2.LEASED, submit_pb2.RUNNING):
            notes = details[job_id].job_spec.annotations
            key = (notes[ann.TASK_ATTEMPT], notes[ann.TASK_GENERATION])
            out.setdefault(key, []).append(job_id)
    return out


def check_races(clients: list[ArmadaClient], build: Callable[[str], Any], size: int) -> None:
    for n in range(ROUNDS):
        task = f"dag/run-{n}/task/-1"
        submissions = race(clients, task, build)
        live = live_generations(clients[0], task)
        assert len(live) == 1, (n, live, submissions)
        [jobs] = live.values()
        assert len(jobs) == size
        # each submitter waits on the live generation, or on jobs the other then cancelled
        for s in submissions:
            assert sorted(s.job_ids) == sorted(jobs) or not set(s.job_ids) & set(jobs), (n, s)


@pytest.fixture
def clients(server: EmbeddedServer) -> Iterator[list[ArmadaClient]]:
    found = [ArmadaClient(server.address, timeout=30) for _ in range(2)]
    found[0].create_queue(submit_pb2.Queue(name="q", priority_factor=1))
    yield found
    for c in found:
        c.close()


def test_two_attempts_released_at_once_leave_one_live_generation(
    clients: list[ArmadaClient],
) -> None:
    check_races(clients, one, 1)


def test_two_attempts_of_a_gang_released_at_once_leave_one_gang(
    clients: list[ArmadaClient],
) -> None:
    check_races(clients, gang, 3)
