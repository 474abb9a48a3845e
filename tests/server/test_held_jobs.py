"""The scheduling leader's held jobs, brought up to date by change numbers, always equal what a
full read of the database finds: whichever replica wrote the change (submissions, cancels,
reprioritisations and executors' reports through a second replica's storage; leases,
preemptions and the reasons it notes by the leader's own cycles), on SQLite and PostgreSQL."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
import sqlalchemy

from armada_core.api import executor_pb2, submit_pb2
from armada_core.jobs import annotations as ann
from armada_core.retry import RetrySettings
from armada_core.scheduling.reasons import QUEUE_CORDONED
from armada_server.config import ServerConfig
from armada_server.executors.backend import update
from armada_server.scheduling.loop import SchedulingLoop
from armada_server.scheduling.running_views import RunningViews
from armada_server.scheduling.snapshot import Made, build_snapshot
from armada_server.storage import Storage, open_storage
from armada_server.storage import schema as t
from armada_server.storage.held_jobs import FULL_READ_EVERY, HeldJobs
from armada_server.storage.scheduling_reads import SchedulingState

from ..jobs.factories import T0, container, item

QUEUES = ("a", "b")
NODES = [
    executor_pb2.Node(name=f"n{i}", allocatable={"cpu": "4", "memory": "16Gi"}) for i in range(3)
]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def replicas(database_url: str) -> Iterator[tuple[Storage, Storage, Clock]]:
    yield from two_replicas(database_url)


def two_replicas(database_url: str) -> Iterator[tuple[Storage, Storage, Clock]]:
    """Two replicas' storage on one database, on one clock, with queues a and b."""
    clock = Clock()
    retrying = RetrySettings(enabled=True)
    first = open_storage(database_url, clock=clock, retry_settings=retrying)
    second = open_storage(database_url, clock=clock, retry_settings=retrying)
    # Retries wait 15 s: some are held back by their delay while the tests' clocks run.
    first.retry_policies.create_retry_policy(
        submit_pb2.RetryPolicy(
            name="p",
            retry_limit=3,
            default_action=submit_pb2.RETRY_ACTION_RETRY,
            backoff_initial_delay_seconds=15,
        )
    )
    for name in QUEUES:
        first.queues.create_queue(
            submit_pb2.Queue(name=name, priority_factor=1, retry_policies=["p"])
        )
    yield first, second, clock
    first.engine.dispose()
    second.engine.dispose()


def leader(storage: Storage, clock: Clock) -> SchedulingLoop:
    config = ServerConfig(port=0, http_port=None, executor="none", database_url="sqlite://")
    return SchedulingLoop.over(storage, config, clock=clock)


def jobs(rng: random.Random) -> list[submit_pb2.JobSubmitRequestItem]:
    """A few jobs of random sizes, or a gang of two."""
    if rng.random() < 0.2:
        gang = {ann.GANG_ID: f"g{rng.randrange(10**9)}", ann.GANG_CARDINALITY: "2"}
        return [item(pod(1, rng), annotations=gang)] * 2
    return [item(pod(rng.choice([1, 2, 3]), rng), priority=rng.random()) for _ in range(5)]


def pod(cpu: int, rng: random.Random) -> dict[str, object]:
    """A pod of `cpu` CPUs, preemptible or not."""
    name = rng.choice(["armada-default", "armada-preemptible"])
    return {"containers": [container(cpu=str(cpu))], "priorityClassName": name}


def contents(state: SchedulingState) -> tuple[object, ...]:
    return (state.queued, list(state.running), state.succeeded, state.ended_roles)


SUCCEEDED = executor_pb2.RunUpdate.Succeeded()


def test_held_jobs_equal_a_full_read_after_every_change(
    replicas: tuple[Storage, Storage, Clock],
) -> None:
    first, second, clock = replicas
    rng = random.Random(7)
    loop = leader(first, clock)
    held = loop.held  # brought up to date here as the loop's next cycle would
    runs: dict[str, str] = {}  # run id -> job id, of leases the executor holds

    def sync(*updates: executor_pb2.RunUpdate) -> None:
        request = executor_pb2.SyncRequest(
            executor_id="e1", pool="default", nodes=NODES, run_ids=list(runs), updates=updates
        )
        response = second.executors.executor_sync(request)
        runs.update((lease.run_id, lease.job.id) for lease in response.leases)

    sync()
    seen: set[str] = set()
    held_back = 0  # steps at which a retry's delay kept a held job from being due
    cache: dict[str, Made] = {}
    running = RunningViews()  # kept by these reads; the loop's cycles read in between
    patched = 0
    for step in range(80):
        clock.now += timedelta(seconds=rng.choice([1, 2, 5]))
        action = rng.random()
        # Chosen in submission order (job ids are made in it), never by random run ids: the
        # same steps run every time.
        leased = sorted(runs, key=runs.__getitem__)
        live = [j.id for j in held.queued.values()] + [runs[r] for r in leased]
        if action < 0.3:
            second.submissions.submit(rng.choice(QUEUES), "s", jobs(rng), owner="u")
        elif action < 0.4 and live:
            job_id = rng.choice(live)
            for queue in QUEUES:
                second.submissions.cancel(queue, "s", [job_id])
        elif action < 0.5 and held.queued:
            job_id = rng.choice(sorted(held.queued))
            second.submissions.reprioritize(
                held.queued[job_id].queue, "s", [job_id], 5.0, requestor="u"
            )
        elif action < 0.75 and runs:
            run_id = rng.choice(leased)
            kind = rng.choice(["running", "succeeded", "failed", "returned"])
            news = {
                "running": {"running": executor_pb2.RunUpdate.Running(node="n0")},
                "succeeded": {"succeeded": executor_pb2.RunUpdate.Succeeded()},
                "failed": {"failed": executor_pb2.RunUpdate.Failed(reason="exit 1")},
                "returned": {"returned": executor_pb2.RunUpdate.Returned(reason="no room")},
            }[kind]
            sync(update(run_id, runs[run_id], at=clock.now, **news))
            if kind != "running":
                del runs[run_id]
        else:
            # A run that ends just before the cycle: only the cycle's read finds it ended.
            ending = leased[:1] if action > 0.9 else []
            sync(*(update(r, runs.pop(r), at=clock.now, succeeded=SUCCEEDED) for r in ending))
            loop.cycle()
            sync()
        kept = first.scheduling_reads.scheduling_state(
            executor_timeout=86_400, now=clock.now, held=held
        )
        full = first.scheduling_reads.scheduling_state(executor_timeout=86_400, now=clock.now)
        assert contents(kept) == contents(full), f"step {step}"
        assert all(j.retry_after > clock.now for j in held.delayed.values()), f"step {step}"
        # The views made from what is held, reusing the last ones, are those made afresh:
        # also when the loop's cycle brought what is held up to date in between.
        classes = loop.config.priority_classes
        patched += running.mark is not None and running.mark == held.since
        views, _ = build_snapshot(
            kept, classes, clock.now, cache=cache, changed=held.changed, running_cache=running
        )
        assert views.jobs == build_snapshot(full, classes, clock.now)[0].jobs, f"step {step}"
        assert views.serials is not None and views.serials.jobs is views.jobs
        assert views.serials.serials.tolist() == [j.serial for j in views.jobs], f"step {step}"
        seen.update(j.id for j in kept.running)
        held_back += any(j.retry_after and j.retry_after > clock.now for j in held.queued.values())
    assert len(seen) > 10  # jobs were leased and run
    assert held_back > 0
    assert patched > 20  # views of the running jobs were patched


def ids(state: SchedulingState) -> tuple[list[str], list[str]]:
    return [j.id for j in state.queued], [j.id for j in state.running]


def test_a_cycle_writes_its_leases_before_its_waiting_reasons(
    replicas: tuple[Storage, Storage, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Leases go in slices, the first with the preemptions, the last with the reasons (at a
    cold start every queued job's): executors get the first leases without waiting for
    them. The reasons are noted in what the leader holds once written."""
    from armada_server.scheduling import loop as loop_module

    first, _, clock = replicas
    monkeypatch.setattr(loop_module, "LEASE_SLICE", 2)
    first.executors.executor_sync(
        executor_pb2.SyncRequest(executor_id="e1", pool="default", nodes=NODES)
    )

    def spec(cpu: str) -> dict[str, object]:
        return {"containers": [container(cpu=cpu)], "priorityClassName": "armada-default"}

    small = [item(spec("1")) for _ in range(6)]
    large = [item(spec("8")) for _ in range(3)]  # fit no node
    waiting = first.submissions.submit("a", "s", large, owner="u")
    first.submissions.submit("a", "s", small, owner="u")
    loop = leader(first, clock)
    writes: list[tuple[int, int]] = []
    apply = loop.writes.apply_schedule

    def recorded(**kwargs: object) -> int:
        writes.append((len(kwargs["scheduled"]), len(kwargs["reasons"])))  # type: ignore[arg-type]
        return apply(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loop.writes, "apply_schedule", recorded)
    assert loop.cycle() == 6
    assert writes == [(2, 0), (2, 0), (2, 3)]
    reasons = {j: loop.held.queued[j].reason for j in waiting}
    assert all(reasons.values()) and loop.held.settled is not None


def test_a_cycle_writes_its_gangs_by_the_keys_of_the_members_it_scheduled(
    replicas: tuple[Storage, Storage, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gang keys a cycle's writes keep whole come from the views the scheduled jobs'
    rows hold: a gang's members, and nothing for jobs not in a gang or not scheduled."""
    first, _, clock = replicas
    first.executors.executor_sync(
        executor_pb2.SyncRequest(executor_id="e1", pool="default", nodes=NODES)
    )
    spec = {"containers": [container(cpu="1")], "priorityClassName": "armada-default"}

    def gang(name: str, size: int) -> list[submit_pb2.JobSubmitRequestItem]:
        keys = {ann.GANG_ID: name, ann.GANG_CARDINALITY: str(size)}
        return [item(spec, annotations=keys)] * size

    loop = leader(first, clock)
    written: list[dict[str, tuple[str, str]]] = []
    apply = loop.writes.apply_schedule

    def recorded(**kwargs: object) -> int:
        written.append(dict(kwargs["gangs"]))  # type: ignore[call-overload]
        return apply(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loop.writes, "apply_schedule", recorded)
    g1 = first.submissions.submit("a", "s", gang("g1", 2), owner="u")
    first.submissions.submit("b", "s", [item(spec)], owner="u")
    too_large = first.submissions.submit("b", "s", gang("g3", 20), owner="u")  # never fits
    assert loop.cycle() == 3
    assert written == [{j: ("a", "g1") for j in g1}]
    clock.now += timedelta(seconds=1)
    g2 = first.submissions.submit("b", "t", gang("g2", 3), owner="u")
    assert loop.cycle() == 3  # the rows of the first cycle hold their views by now
    assert written[1] == {j: ("b", "g2") for j in g2}
    assert not set(too_large) & set(written[0] | written[1])


def test_a_write_committed_after_the_reads_snapshot_is_read_next_time(
    replicas: tuple[Storage, Storage, Clock],
) -> None:
    """The case a change number exists for: a write that commits while a read is under way
    is not in the read's snapshot, and the next read of what changed must find it."""
    first, second, clock = replicas
    rng = random.Random(3)
    submitted = second.submissions.submit("a", "s", jobs(rng) + jobs(rng), owner="u")
    held = HeldJobs()
    reads = first.scheduling_reads
    reads.scheduling_state(executor_timeout=86_400, now=clock.now, held=held)  # a full read
    assert held.changed is None
    reads.scheduling_state(executor_timeout=86_400, now=clock.now, held=held)
    assert held.changed == []  # nothing changed since
    held.move_on(first.transactions)  # as scheduling_state does before its read
    with first.transactions.read(snapshot=True) as conn:
        held.refresh(conn, clock.now)
        second.submissions.cancel("a", "s", submitted[:1])  # commits inside the read
        assert submitted[0] in held.queued  # the snapshot still has it queued
    kept = reads.scheduling_state(executor_timeout=86_400, now=clock.now, held=held)
    full = reads.scheduling_state(executor_timeout=86_400, now=clock.now)
    assert contents(kept) == contents(full)
    assert ids(kept)[0] == sorted(submitted[1:])
    assert held.changed == submitted[:1]  # the cancelled job alone was read


def test_the_full_read_net_runs_on_the_process_clock_not_the_servers(
    replicas: tuple[Storage, Storage, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every FULL_READ_EVERY of real time the leader reads every job again (a net under
    writes from outside the server); a server clock that runs ahead, as the what-if
    simulator's does, does not bring it sooner."""
    first, _, clock = replicas
    first.submissions.submit("a", "s", jobs(random.Random(4)), owner="u")
    held = HeldJobs()
    reads = first.scheduling_reads
    reads.scheduling_state(executor_timeout=86_400, now=clock.now, held=held)
    assert held.changed is None  # the first read reads everything
    clock.now += timedelta(days=1)
    reads.scheduling_state(executor_timeout=86_400 * 2, now=clock.now, held=held)
    assert held.changed == []  # only what changed: nothing
    later = time.monotonic() + FULL_READ_EVERY
    monkeypatch.setattr(time, "monotonic", lambda: later)
    reads.scheduling_state(executor_timeout=86_400 * 2, now=clock.now, held=held)
    assert held.changed is None


@pytest.mark.postgres
def test_a_write_begun_before_the_read_and_committed_after_it_is_read_next_time(
    postgres_server,  # type: ignore[no-untyped-def]
) -> None:
    """PostgreSQL's writers run beside the reader: a transaction that wrote before the read
    took its snapshot and commits after it (and after a later transaction committed) is
    found by the next read of what changed."""
    clock = Clock()
    url = postgres_server.new_database()
    storage = open_storage(url, clock=clock)
    storage.queues.create_queue(submit_pb2.Queue(name="a", priority_factor=1))
    submitted = storage.submissions.submit("a", "s", jobs(random.Random(5)), owner="u")
    held = HeldJobs()
    reads = storage.scheduling_reads
    reads.scheduling_state(executor_timeout=86_400, now=clock.now, held=held)
    writer = storage.engine.connect()
    try:
        transaction = writer.begin()
        writer.execute(
            sqlalchemy.update(t.jobs).where(t.jobs.c.id == submitted[0]).values(priority=99.0)
        )  # stamped with the writer's transaction id, not committed
        storage.submissions.cancel("a", "s", submitted[1:2])  # a later writer commits first
        before = reads.scheduling_state(executor_timeout=86_400, now=clock.now, held=held)
        assert {j.id: j.priority for j in before.queued}[submitted[0]] != 99.0
        transaction.commit()
    finally:
        writer.close()
    after = reads.scheduling_state(executor_timeout=86_400, now=clock.now, held=held)
    assert {j.id: j.priority for j in after.queued}[submitted[0]] == 99.0
    full = reads.scheduling_state(executor_timeout=86_400, now=clock.now)
    assert contents(after) == contents(full)
    storage.engine.dispose()


def test_a_replica_that_leads_again_decides_on_what_is_stored_not_on_what_it_held(
    postgres_server,  # type: ignore[no-untyped-def]
) -> None:
    """Leadership passes from replica A to B and back (A's lock connection dies; B leads
    until it stops). What B wrote meanwhile without a change number (the waiting reasons it
    notes in what it holds) is what A decides on when it leads again: A lets go of what it
    held when it finds it no longer leads, and reads everything afresh. A replica that stops
    leading gives the lock up at once, not when its pooled connection is closed."""
    first, second, clock = next(two_replicas(postgres_server.new_database()))
    a, b = leader(first, clock), leader(second, clock)
    request = executor_pb2.SyncRequest(executor_id="e1", pool="default", nodes=NODES)
    second.executors.executor_sync(request)
    cpus = [item(pod(1, random.Random(0))) for _ in range(14)]  # 12 fit on 3 nodes of 4
    job_ids = second.submissions.submit("a", "s", cpus, owner="u")
    assert a.cycle() == 12
    waiting = [j for j, r in first.job_reads.scheduling_reasons(job_ids).items() if r]
    before = first.job_reads.scheduling_reasons(waiting)
    assert len(waiting) == 2 and QUEUE_CORDONED not in before.values()

    with second.engine.connect() as conn:  # A's leadership lock goes with its connection
        conn.execute(
            sqlalchemy.text(
                "SELECT pg_terminate_backend(pid) FROM pg_locks "
                "WHERE locktype = 'advisory' AND pid <> pg_backend_pid()"
            )
        )
    second.queues.set_cordoned("a", True)
    clock.now += timedelta(seconds=1)
    second.executors.executor_sync(request)
    assert b.cycle() == 0  # B leads: the jobs wait because their queue is cordoned
    assert set(first.job_reads.scheduling_reasons(waiting).values()) == {QUEUE_CORDONED}
    second.queues.set_cordoned("a", False)
    b.close()  # B stops leading (its process goes on): the lock is free at once

    clock.now += timedelta(seconds=1)
    second.executors.executor_sync(request)
    assert a.cycle() == 0  # A finds its lock gone: it does not lead, and lets go
    assert a.cycle() == 0  # A leads again: nothing has room, and the reasons are told again
    assert a.leadership.is_leader() and a.cycles == 2
    assert first.job_reads.scheduling_reasons(waiting) == before
    first.engine.dispose()
    second.engine.dispose()
