"""What a replica holds of an executor's active runs between its syncs, brought up to date by
change numbers, always equals what a full read of the database finds: whichever replica the
executor synced with last and whichever wrote the change (submissions, cancels, preemptions
asked for, cycles' leases, the executor's own reports), on SQLite and PostgreSQL."""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy

from armada_core.api import executor_pb2, submit_pb2
from armada_server.config import ServerConfig
from armada_server.executors.backend import update
from armada_server.scheduling.loop import SchedulingLoop
from armada_server.storage import Storage, open_storage
from armada_server.storage import schema as t
from armada_server.storage.executor_runs import FULL_READ_EVERY, ActiveRuns, HeldRuns

from ..jobs.factories import item
from .test_held_jobs import Clock, pod, two_replicas


@pytest.fixture
def replicas(database_url: str) -> Iterator[tuple[Storage, Storage, Clock]]:
    yield from two_replicas(database_url)


NODES = [
    executor_pb2.Node(name=f"n{i}", allocatable={"cpu": "4", "memory": "16Gi"}) for i in range(3)
]
REPORTS = {
    "pending": {"pending": executor_pb2.RunUpdate.Pending()},
    "running": {"running": executor_pb2.RunUpdate.Running(node="n0")},
    "succeeded": {"succeeded": executor_pb2.RunUpdate.Succeeded()},
    "failed": {"failed": executor_pb2.RunUpdate.Failed(reason="exit 1")},
    "returned": {"returned": executor_pb2.RunUpdate.Returned(reason="no room")},
}


def full_read(storage: Storage, executor: str) -> ActiveRuns:
    with storage.transactions.write() as (conn, _):
        return HeldRuns(None).read(conn, executor)


def brought_up_to_date(storage: Storage, executor: str) -> ActiveRuns | None:
    """What the executor's next sync at `storage` would find, from a copy of what the replica
    holds (None: it holds nothing, the sync would read everything)."""
    held = storage.executors.runs._held.get(executor)
    if held is None:
        return None
    runs = HeldRuns(copy.deepcopy(held))
    with storage.transactions.write() as (conn, _):
        found = runs.read(conn, executor)
    assert runs.changed is not None  # read only what changed
    return found


def same(held: ActiveRuns | None, full: ActiveRuns) -> bool:
    assert held is not None
    return (set(held.leased), held.started, held.preempting) == (
        set(full.leased),
        full.started,
        full.preempting,
    )


class Executor:
    """An executor that holds what it was leased, reports on it, and syncs with either
    replica."""

    def __init__(self, name: str, rng: random.Random) -> None:
        self.name = name
        self.rng = rng
        self.runs: dict[str, str] = {}  # run id -> job id
        self.stopped: list[str] = []

    def sync(self, storage: Storage, *updates: executor_pb2.RunUpdate) -> None:
        request = executor_pb2.SyncRequest(
            executor_id=self.name,
            pool="default",
            nodes=NODES,
            run_ids=sorted(self.runs),
            updates=updates,
        )
        response = storage.executors.executor_sync(request)
        self.runs.update((lease.run_id, lease.job.id) for lease in response.leases)
        for stop in response.stop:
            self.stopped.append(stop.run_id)
            self.runs.pop(stop.run_id, None)  # stops at once, says nothing more


def test_held_runs_equal_a_full_read_after_every_sync(
    replicas: tuple[Storage, Storage, Clock],
) -> None:
    first, second, clock = replicas
    rng = random.Random(11)
    config = ServerConfig(port=0, http_port=None, executor="none", database_url="sqlite://")
    loop = SchedulingLoop.over(first, config, clock=clock)
    executors = [Executor("e1", rng), Executor("e2", rng)]
    submitted: list[str] = []
    checked = 0
    for step in range(120):
        clock.now += timedelta(seconds=rng.choice([1, 2, 5]))
        writer = rng.choice([first, second])
        action = rng.random()
        executor = rng.choice(executors)
        # Runs are chosen in their jobs' order (job ids are made in submission order), never
        # by random run ids: the same steps run every time.
        leased = sorted(executor.runs, key=executor.runs.__getitem__)
        if action < 0.2:
            cpus = [rng.choice([1, 2]) for _ in range(rng.randint(1, 4))]
            items = [item(pod(c, rng)) for c in cpus]
            submitted += writer.submissions.submit("a", "s", items, owner="u")
        elif action < 0.3 and submitted:
            writer.submissions.cancel("a", "s", [rng.choice(submitted)])
        elif action < 0.4 and submitted:
            writer.submissions.request_preemption(
                "a", "s", [rng.choice(submitted)], requestor="u", reason="test"
            )
        elif action < 0.7 and executor.runs:
            run_id = rng.choice(leased)
            kind = rng.choice(sorted(REPORTS))
            report = update(run_id, executor.runs[run_id], at=clock.now, **REPORTS[kind])
            if kind in ("succeeded", "failed", "returned"):
                del executor.runs[run_id]
            executor.sync(writer, report)
        elif action < 0.8 and executor.runs:
            del executor.runs[rng.choice(leased)]  # a pod gone missing
            executor.sync(writer)
        else:
            loop.cycle()
            executor.sync(writer)
        for replica in (first, second):
            for e in executors:
                held = brought_up_to_date(replica, e.name)
                if held is not None:
                    assert same(held, full_read(replica, e.name)), f"step {step}"
                    checked += 1
    assert checked > 100
    assert sum(len(e.stopped) for e in executors) > 0  # runs were stopped or preempted
    ran = sum(len(e.runs) for e in executors)
    assert ran > 0 or any(e.stopped for e in executors)


def test_a_sync_that_fails_leaves_nothing_held(
    replicas: tuple[Storage, Storage, Clock],
) -> None:
    first, _, _ = replicas
    runs = first.executors.runs
    Executor("e1", random.Random(1)).sync(first)
    assert runs.holding("e1") is not None
    with pytest.raises(RuntimeError), runs.held("e1") as held:
        with first.transactions.write() as (conn, _):
            held.read(conn, "e1")
        raise RuntimeError("the sync failed after its read")
    assert runs.holding("e1") is None
    with runs.held("e1") as held, first.transactions.write() as (conn, _):
        held.read(conn, "e1")
        assert held.changed is None  # read in full


def test_the_full_read_net_runs_on_the_process_clock_not_the_servers(
    replicas: tuple[Storage, Storage, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every FULL_READ_EVERY of real time a sync reads all the executor's runs again (a net
    under writes from outside the server); a server clock that runs ahead, as the what-if
    simulator's does, does not bring it sooner."""
    first, _, clock = replicas
    runs = first.executors.runs
    Executor("e1", random.Random(1)).sync(first)  # its first sync reads everything
    clock.now += timedelta(days=1)
    with runs.held("e1") as held, first.transactions.write() as (conn, _):
        held.read(conn, "e1")
        assert held.changed is not None  # only what changed
    later = time.monotonic() + FULL_READ_EVERY
    monkeypatch.setattr(time, "monotonic", lambda: later)
    with runs.held("e1") as held, first.transactions.write() as (conn, _):
        held.read(conn, "e1")
        assert held.changed is None  # read in full


@pytest.mark.postgres
def test_a_write_begun_before_a_sync_and_committed_after_it_is_read_next_time(
    postgres_server,  # type: ignore[no-untyped-def]
) -> None:
    """On PostgreSQL, a transaction that wrote before a sync's read and commits after it
    (after a later transaction committed) is found by the executor's next sync."""
    clock = Clock()
    storage = open_storage(postgres_server.new_database(), clock=clock)
    storage.queues.create_queue(submit_pb2.Queue(name="a", priority_factor=1))
    items = [item(pod(1, random.Random(2))) for _ in range(3)]
    submitted = storage.submissions.submit("a", "s", items, owner="u")
    config = ServerConfig(port=0, http_port=None, executor="none", database_url="sqlite://")
    executor = Executor("e1", random.Random(2))
    executor.sync(storage)
    SchedulingLoop.over(storage, config, clock=clock).cycle()
    executor.sync(storage)
    assert sorted(executor.runs.values()) == sorted(submitted)
    writer = storage.engine.connect()
    try:
        transaction = writer.begin()
        writer.execute(
            sqlalchemy.update(t.jobs)
            .where(t.jobs.c.id == submitted[0])
            .values(preempt_requested=True)
        )  # stamped with the writer's transaction id, not committed
        storage.submissions.cancel("a", "s", submitted[1:2])  # a later writer commits first
        executor.sync(storage)
        assert submitted[1] not in executor.runs.values()  # told to stop
        assert submitted[0] in executor.runs.values()  # not yet seen
        transaction.commit()
    finally:
        writer.close()
    executor.sync(storage)
    held = storage.executors.runs.holding("e1")
    assert held is not None and list(held.preempting.values()) == [submitted[0]]
    assert submitted[0] not in executor.runs.values()  # told to stop: preempted
    storage.engine.dispose()
