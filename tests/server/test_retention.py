"""Retention: jobs that ended before the cut-off go with their runs, events and the rows that
hang off them, in bounded batches, on SQLite and PostgreSQL; live jobs, recent ones, gangs
with a live member and the events of live jobs stay. A job set whose events are all pruned
reads like one that never existed; a watcher resuming from a pruned message id gets what is
left after it. Scheduling cycles, executors and watchers go on while pruning runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta

import grpc
import pytest
from sqlalchemy import func, insert, select

from armada_core.api import event_pb2, event_pb2_grpc, executor_pb2, submit_pb2
from armada_core.jobs import JobState
from armada_core.jobs import annotations as ann
from armada_server.app import EmbeddedServer
from armada_server.cli import main
from armada_server.config import ConfigError, ServerConfig, build
from armada_server.pruning import Pruner
from armada_server.retention_period import retention_seconds
from armada_server.scheduling.loop import _seen
from armada_server.storage import Storage
from armada_server.storage import schema as t
from armada_server.storage.base import utcnow
from armada_server.storage.database import open_database

from ..jobs.factories import T0, item
from .conftest import Stubs
from .test_scheduling_loop import CLASSES, Executor, low

NODE = executor_pb2.Node(name="n1", allocatable={"cpu": "64", "memory": "256Gi"})
WEEK = timedelta(days=7)


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
    store.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
    sync(store)
    yield store
    engine.dispose()


def sync(
    store: Storage, *updates: executor_pb2.RunUpdate, held: tuple[str, ...] = ()
) -> executor_pb2.SyncResponse:
    """A sync of executor e1 that holds the runs `held` (and those it reports on)."""
    run_ids = list(held) + [u.run_id for u in updates]
    return store.executors.executor_sync(
        executor_pb2.SyncRequest(
            executor_id="e1", pool="default", nodes=[NODE], updates=list(updates), run_ids=run_ids
        )
    )


def submit(store: Storage, job_set: str, count: int = 1, **fields: object) -> list[str]:
    return store.submissions.submit("q", job_set, [item(**fields) for _ in range(count)], owner="t")


def run(store: Storage, ids: list[str], gang: str | None = None) -> dict[str, str]:
    """Lease the jobs on n1 and start them; returns each job's run id."""
    state = store.scheduling_reads.scheduling_state(executor_timeout=3600)
    store.scheduling_writes.apply_schedule(
        scheduled={j: ("e1", "n1", "default") for j in ids},
        preempted=(),
        failed={},
        reasons={},
        seen=_seen(state, set(ids), ()),
        gangs={j: ("q", gang) for j in ids} if gang else None,
    )
    runs = {lease.job.id: lease.run_id for lease in sync(store).leases}
    sync(store, *(update(j, r, running=executor_pb2.RunUpdate.Running()) for j, r in runs.items()))
    return runs


def update(job_id: str, run_id: str, **kind: object) -> executor_pb2.RunUpdate:
    return executor_pb2.RunUpdate(run_id=run_id, job_id=job_id, **kind)  # type: ignore[arg-type]


def succeed(store: Storage, runs: dict[str, str], held: tuple[str, ...] = ()) -> None:
    sync(
        store,
        *(update(j, r, succeeded=executor_pb2.RunUpdate.Succeeded()) for j, r in runs.items()),
        held=held,
    )


def count(store: Storage, table: t.Table, *where: object) -> int:
    with store.transactions.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one())  # type: ignore[arg-type]


def kept(store: Storage, job_ids: list[str]) -> dict[str, int]:
    """Rows left of the jobs, by table."""
    return {
        "jobs": count(store, t.jobs, t.jobs.c.id.in_(job_ids)),
        "runs": count(store, t.runs, t.runs.c.job_id.in_(job_ids)),
        "events": count(store, t.events, t.events.c.job_id.in_(job_ids)),
        "reasons": count(store, t.job_reasons, t.job_reasons.c.job_id.in_(job_ids)),
    }


GONE = {"jobs": 0, "runs": 0, "events": 0, "reasons": 0}


def test_jobs_that_ended_before_the_cutoff_go_with_their_runs_events_and_reasons(
    store: Storage, clock: Clock
) -> None:
    succeeded = submit(store, "old", 2)
    succeed(store, run(store, succeeded))
    cancelled = submit(store, "old")
    store.submissions.cancel("q", "old", cancelled)
    with store.transactions.write() as (conn, _):  # a reason kept for the scheduling reports
        conn.execute(insert(t.job_reasons).values(job_id=succeeded[0], cycle=1, reason="waits"))
    live_queued = submit(store, "mixed")
    live_running = submit(store, "mixed")
    run(store, live_running)
    ended_in_mixed = submit(store, "mixed")
    store.submissions.cancel("q", "mixed", ended_in_mixed)
    clock.now = T0 + WEEK + timedelta(hours=1)
    recent = submit(store, "recent")
    store.submissions.cancel("q", "recent", recent)
    assert kept(store, succeeded)["runs"] == 2 and kept(store, succeeded)["reasons"] == 1

    pruned = store.retention.prune(clock.now - WEEK, batch=100)

    assert (pruned.jobs, pruned.runs, pruned.reasons, pruned.job_sets) == (4, 2, 1, 1)
    assert kept(store, succeeded + cancelled + ended_in_mixed) == GONE
    assert kept(store, live_queued)["jobs"] == 1 and kept(store, live_queued)["events"] == 2
    assert kept(store, live_running) == {"jobs": 1, "runs": 1, "events": 4, "reasons": 0}
    assert kept(store, recent)["jobs"] == 1 and kept(store, recent)["events"] > 0
    # A set with nothing left is forgotten; a set with live jobs keeps its numbering.
    assert store.events.last_seq("q", "old") is None
    assert store.events.last_seq("q", "mixed") is not None
    [job] = store.job_reads.jobs(live_running)
    assert job.state == JobState.RUNNING
    assert store.retention.prune(clock.now - WEEK, batch=100).jobs == 0  # idempotent


def test_batches_are_bounded_and_the_oldest_go_first(store: Storage, clock: Clock) -> None:
    ids = []
    for hour in range(7):
        clock.now = T0 + timedelta(hours=hour)
        ids += submit(store, f"s{hour}")
        store.submissions.cancel("q", f"s{hour}", ids[-1:])
    cutoff = T0 + timedelta(days=1)
    first = store.retention.prune_batch(cutoff, batch=3)
    assert first is not None and first.jobs == 3
    assert kept(store, ids[:3]) == GONE and kept(store, ids[3:])["jobs"] == 4
    sizes = []
    while (done := store.retention.prune_batch(cutoff, batch=3)) and done.jobs:
        sizes.append(done.jobs)
    assert sizes == [3, 1]
    with pytest.raises(ValueError, match="prune batch: must be at least 1"):
        store.retention.prune_batch(cutoff, batch=0)


def test_a_gang_stays_while_a_member_is_live(store: Storage, clock: Clock) -> None:
    gang = {ann.GANG_ID: "g1", ann.GANG_CARDINALITY: "2"}
    ids = submit(store, "gang", 2, annotations=gang)
    runs = run(store, ids, gang="g1")
    first, second = ids
    succeed(store, {first: runs[first]}, held=(runs[second],))
    clock.now = T0 + 2 * WEEK
    assert store.retention.prune(clock.now - WEEK, batch=10).jobs == 0
    assert kept(store, [first])["jobs"] == 1
    [job] = store.job_reads.jobs([second])
    assert job.state == JobState.RUNNING
    succeed(store, {second: runs[second]})  # the gang ends now: both wait out the retention
    assert store.retention.prune(clock.now - WEEK, batch=10).jobs == 0
    clock.now += WEEK + timedelta(seconds=1)
    assert store.retention.prune(clock.now - WEEK, batch=10).jobs == 2
    assert kept(store, ids) == GONE


def test_a_task_lock_goes_with_the_last_job_of_its_task(store: Storage, clock: Clock) -> None:
    task = {ann.TASK: "etl", ann.TASK_ATTEMPT: "1", ann.TASK_GENERATION: "0"}
    ids = submit(store, "tasks", annotations=task)
    store.submissions.cancel("q", "tasks", ids)
    assert count(store, t.task_locks) == 1
    clock.now = T0 + 2 * WEEK
    assert store.retention.prune(clock.now - WEEK, batch=10).task_locks == 1
    assert count(store, t.task_locks) == 0


def test_the_pruner_prunes_after_the_configured_retention_and_not_forever(
    store: Storage, clock: Clock
) -> None:
    ids = submit(store, "old", 5)
    store.submissions.cancel("q", "old", ids)
    clock.now = T0 + WEEK + timedelta(minutes=1)
    config = ServerConfig(retention="forever", prune_batch=2, prune_pause=0)
    pruner = Pruner(store.retention, lambda: config, clock)
    with ThreadPoolExecutor(1) as pool:
        assert asyncio.run(pruner.round(pool)).jobs == 0
        config = replace(config, retention="8d")
        assert asyncio.run(pruner.round(pool)).jobs == 0
        config = replace(config, retention="7d")
        assert asyncio.run(pruner.round(pool)).jobs == 5
    assert kept(store, ids) == GONE


def test_retention_settings_are_checked() -> None:
    assert retention_seconds("7d") == 7 * 86400
    assert retention_seconds("12h") == 12 * 3600
    assert retention_seconds(90) == 90
    assert retention_seconds(0) is None and retention_seconds("forever") is None
    assert build(retention="2w").retention == "2w"
    for bad, message in [
        ({"retention": "7 days"}, "retention: expected a duration such as 7d"),
        ({"retention": -1}, "retention: must not be negative"),
        ({"prune_batch": 0}, "prune_batch: must be at least 1, got 0"),
        ({"prune_pause": -1}, "prune_pause: must be at least 0"),
    ]:
        with pytest.raises(ConfigError, match=message):
            build(**bad)


# Through the API, on a running server.


@pytest.fixture
def server(database_url: str) -> Iterator[EmbeddedServer]:
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        database_url=database_url,
        scheduling_period=0.1,
        lease_timeout=30.0,
        priority_classes=CLASSES,
        default_priority_class="low",
    )
    with EmbeddedServer(config) as running:
        yield running


def submit_api(api: Stubs, job_set: str, count: int = 1) -> list[str]:
    response = api.submit.SubmitJobs(
        submit_pb2.JobSubmitRequest(
            queue="q", job_set_id=job_set, job_request_items=[low() for _ in range(count)]
        )
    )
    return [i.job_id for i in response.job_response_items]


def cancel_api(api: Stubs, job_set: str) -> None:
    api.submit.CancelJobSet(submit_pb2.JobSetCancelRequest(queue="q", job_set_id=job_set))


def events(
    api: Stubs, job_set: str, after: str = "", *, error_if_missing: bool = False
) -> list[event_pb2.EventStreamMessage]:
    request = event_pb2.JobSetRequest(
        queue="q", id=job_set, from_message_id=after, errorIfMissing=error_if_missing
    )
    return list(api.events.GetJobSetEvents(request))


def job_of(message: event_pb2.EventStreamMessage) -> str:
    kind = message.message.WhichOneof("events")
    assert kind is not None
    return str(getattr(message.message, kind).job_id)


def error_of(api: Stubs, job_set: str) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as e:
        events(api, job_set, error_if_missing=True)
    return e.value.code(), e.value.details().replace(job_set, "<set>")


def test_a_pruned_job_set_reads_like_one_that_never_existed_and_resuming_gets_what_is_left(
    server: EmbeddedServer, api: Stubs, queue: str
) -> None:
    submit_api(api, "old", 2)
    cancel_api(api, "old")
    ended = submit_api(api, "mixed")
    api.submit.CancelJobs(submit_pb2.JobCancelRequest(queue="q", job_set_id="mixed", job_ids=ended))
    assert events(api, "old", error_if_missing=True)  # there before the prune
    pruned_ids = [m.id for m in events(api, "mixed")]
    [live] = submit_api(api, "mixed")
    storage = server.server.storage
    assert storage is not None
    storage.retention.prune(utcnow() + timedelta(seconds=1), batch=100)

    assert events(api, "old") == events(api, "never-existed") == []
    assert error_of(api, "old") == error_of(api, "never-existed")
    assert error_of(api, "old")[0] == grpc.StatusCode.NOT_FOUND
    left = events(api, "mixed")
    assert left and {job_of(m) for m in left} == {live}
    for resumed_at in pruned_ids:  # from a pruned id: everything after it that is left
        assert [m.id for m in events(api, "mixed", resumed_at)] == [m.id for m in left]


def test_cycles_executors_and_watchers_go_on_while_pruning_runs(
    server: EmbeddedServer, api: Stubs, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    storage = server.server.storage
    assert storage is not None
    ex = Executor(api.channel, nodes=4, cpu="16")
    ex.sync()
    watched: list[event_pb2.EventStreamMessage] = []
    stream = event_pb2_grpc.EventStub(api.channel).GetJobSetEvents(
        event_pb2.JobSetRequest(queue="q", id="live", watch=True)
    )
    watcher = threading.Thread(target=lambda: watched.extend(_until_cancelled(stream)))
    stop = threading.Event()
    pruned: list[int] = []
    failures: list[BaseException] = []

    def prune() -> None:
        try:
            while not stop.is_set():
                done = storage.retention.prune_batch(utcnow() + timedelta(seconds=1), batch=5)
                pruned.append(done.jobs if done else 0)
        except BaseException as e:
            failures.append(e)

    pruner = threading.Thread(target=prune)
    live = submit_api(api, "live", 4)
    watcher.start()
    pruner.start()
    with caplog.at_level(logging.ERROR, logger="armada_server"):
        for round_ in range(6):
            churn = submit_api(api, f"churn-{round_}", 10)
            cancel_api(api, f"churn-{round_}")
            assert len(churn) == 10
        ex.wait_leases(4)
        for lease in ex.held.values():
            ex.sync(ex.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node)))
        expected = 4 * 4  # submitted, queued, leased, running
        deadline = time.monotonic() + 30
        while len(watched) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        pruner.join(30)
        stream.cancel()
        watcher.join(30)
    assert not failures and not [r for r in caplog.records if r.levelno >= logging.ERROR]
    storage.retention.prune(utcnow() + timedelta(seconds=1), batch=100)
    assert count(storage, t.jobs, t.jobs.c.job_set.like("churn-%")) == 0
    assert count(storage, t.events, t.events.c.job_set.like("churn-%")) == 0
    ids = [int(m.id) for m in watched]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for job in live:
        kinds = [m.message.WhichOneof("events") for m in watched if job_of(m) == job]
        assert kinds == ["submitted", "queued", "leased", "running"], kinds
    assert count(storage, t.events, t.events.c.job_set == "live") == len(watched)
    pruner = server.server.pruner  # the server's own rounds run beside all this
    assert pruner is not None
    deadline = time.monotonic() + 30
    while pruner.rounds < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pruner.rounds >= 1


def _until_cancelled(
    stream: Iterator[event_pb2.EventStreamMessage],
) -> Iterator[event_pb2.EventStreamMessage]:
    try:
        yield from stream
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.CANCELLED:
            raise


def test_the_prune_command_prunes_what_ended_before_older_than(
    store: Storage, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = submit(store, "old", 3)  # ended at T0, days before the command runs
    store.submissions.cancel("q", "old", ids)
    days = (utcnow() - T0).days
    assert main(["prune", "--older-than", f"{days + 1}d", "--database-url", database_url]) == 0
    assert json.loads(capsys.readouterr().out)["pruned"]["jobs"] == 0
    assert kept(store, ids)["jobs"] == 3
    assert main(["prune", "--older-than", f"{days - 1}d", "--database-url", database_url]) == 0
    assert json.loads(capsys.readouterr().out)["pruned"]["jobs"] == 3
    assert kept(store, ids) == GONE
    assert main(["prune", "--older-than", "soon", "--database-url", database_url]) == 2
    assert "--older-than: expected a duration such as 7d" in capsys.readouterr().err
