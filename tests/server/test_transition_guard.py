"""The transition guard and per-job isolation, on SQLite and PostgreSQL.

Every job change is written only where the job's row still has the version it was decided
on; a decision that no longer applies is skipped, never raised; a job whose processing raises
fails alone, and scheduling goes on for everyone else.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import grpc
import pytest
from sqlalchemy import select, text, update

from armada_core.api import (
    event_pb2,
    event_pb2_grpc,
    executor_pb2,
    job_pb2_grpc,
    submit_pb2,
    submit_pb2_grpc,
)
from armada_core.jobs import JobState, lifecycle
from armada_core.jobs import annotations as ann
from armada_server.app import EmbeddedServer
from armada_server.config import ServerConfig
from armada_server.scheduling.loop import _seen
from armada_server.storage import Storage
from armada_server.storage import schema as t
from armada_server.storage.database import open_database
from armada_server.storage.guard import Conflict

from ..jobs.factories import container, item
from .conftest import Stubs
from .test_scheduling_loop import CLASSES, Executor, kinds, submit, wait_state

NODE = executor_pb2.Node(name="n1", allocatable={"cpu": "4", "memory": "8Gi"})


@pytest.fixture
def store(database_url: str) -> Iterator[Storage]:
    engine = open_database(database_url)
    store = Storage(engine)
    store.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
    store.executors.executor_sync(
        executor_pb2.SyncRequest(executor_id="e1", pool="default", nodes=[NODE])
    )
    yield store
    engine.dispose()


def submit_one(store: Storage) -> str:
    [job_id] = store.submissions.submit("q", "s", [item()], owner="test")
    return job_id


def lease_decision(store: Storage, job_id: str) -> dict:
    return {
        "scheduled": {job_id: ("e1", "n1", "default")},
        "preempted": (),
        "failed": {},
        "reasons": {},
    }


def test_a_lease_decided_before_a_cancel_is_not_made_after_it(store: Storage) -> None:
    job_id = submit_one(store)
    snapshot = store.scheduling_reads.scheduling_state(executor_timeout=60)
    assert store.submissions.cancel("q", "s", [job_id]) == [job_id]  # acknowledged before the lease
    leased = store.scheduling_writes.apply_schedule(
        **lease_decision(store, job_id), seen=_seen(snapshot, {job_id}, ())
    )
    assert leased == 0
    [job] = store.job_reads.jobs([job_id])
    assert job.state == JobState.CANCELLED and job.runs == ()


def test_a_lease_decided_on_an_older_version_is_skipped(store: Storage) -> None:
    job_id = submit_one(store)
    snapshot = store.scheduling_reads.scheduling_state(executor_timeout=60)
    store.submissions.reprioritize(
        "q", "s", [job_id], 5, requestor="test"
    )  # still queued, but changed
    assert (
        store.scheduling_writes.apply_schedule(
            **lease_decision(store, job_id), seen=_seen(snapshot, {job_id}, ())
        )
        == 0
    )
    fresh = store.scheduling_reads.scheduling_state(executor_timeout=60)
    assert (
        store.scheduling_writes.apply_schedule(
            **lease_decision(store, job_id), seen=_seen(fresh, {job_id}, ())
        )
        == 1
    )


def test_a_write_from_a_stale_read_raises_conflict_and_changes_nothing(store: Storage) -> None:
    job_id = submit_one(store)
    [stale] = store.job_reads.jobs([job_id])
    store.submissions.cancel("q", "s", [job_id])
    after, events = lifecycle.lease(
        stale, run_id="r1", cluster_id="e1", node="n1", pool="default", now=datetime.now(UTC)
    )
    with pytest.raises(Conflict), store.transactions.write() as (conn, touched):
        store.transactions.save_many(conn, touched, [(stale, after, events)])
    [job] = store.job_reads.jobs([job_id])
    assert job.state == JobState.CANCELLED and job.runs == ()
    assert store.events.last_seq("q", "s") == 4  # submitted, queued, cancelling, cancelled


@pytest.mark.postgres
def test_a_transaction_that_loses_a_race_is_decided_again(
    postgres_server, caplog: pytest.LogCaptureFixture
) -> None:
    """A cancel reads the job, another writer commits a change to it before the cancel
    writes: the cancel's write matches no row, and it is decided again from the new state."""
    engine = open_database(postgres_server.new_database())
    store = Storage(engine)
    store.queues.create_queue(submit_pb2.Queue(name="q", priority_factor=1))
    job_id = submit_one(store)
    rival = engine.connect()
    tx = rival.begin()
    rival.execute(
        update(t.jobs).where(t.jobs.c.id == job_id).values(version=t.jobs.c.version + 1)
    )  # holds the row until committed
    result: list[list[str]] = []
    cancel = threading.Thread(
        target=lambda: result.append(store.submissions.cancel("q", "s", [job_id]))
    )
    caplog.set_level("INFO", logger="armada_server")
    cancel.start()
    with engine.connect() as watcher:  # the cancel's UPDATE waits for the rival's row lock
        deadline = time.monotonic() + 30
        while not watcher.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database()"
            )
        ).scalar():
            # pg_stat_activity is a snapshot per transaction: end it to see the next state.
            watcher.rollback()
            assert time.monotonic() < deadline, "the cancel never waited for the row"
            time.sleep(0.01)
    tx.commit()
    rival.close()
    cancel.join(30)
    assert result == [[job_id]]
    assert "deciding again" in caplog.text
    [job] = store.job_reads.jobs([job_id])
    assert job.state == JobState.CANCELLED and job.version == 2  # submitted 0, rival, cancel
    engine.dispose()


# --- isolation: one bad job fails alone ---------------------------------------------------


@pytest.fixture
def server(executorless_server: EmbeddedServer) -> EmbeddedServer:
    return executorless_server


def rewrite_spec(
    server: EmbeddedServer, job_id: str, change: Callable[[submit_pb2.Job], None]
) -> None:
    """Change a stored job's spec as an older server version (with looser checks) could have
    accepted it."""
    store = server.server.storage
    assert store is not None
    with store.transactions.write() as (
        conn,
        _,
    ):  # the store's writer: queued behind the server's own
        raw = conn.execute(select(t.jobs.c.spec).where(t.jobs.c.id == job_id)).scalar_one()
        spec = submit_pb2.Job.FromString(raw)
        change(spec)
        conn.execute(
            update(t.jobs).where(t.jobs.c.id == job_id).values(spec=spec.SerializeToString())
        )


def failure_reasons(api: Stubs, job_id: str) -> list[str]:
    out = []
    for m in api.events.GetJobSetEvents(event_pb2.JobSetRequest(queue="q", id="s")):
        if m.message.WhichOneof("events") == "failed" and m.message.failed.job_id == job_id:
            out.append(m.message.failed.reason)
    return out


def test_a_job_the_scheduler_cannot_read_fails_alone(
    server: EmbeddedServer, api: Stubs, queue: str
) -> None:
    def maybe(spec: submit_pb2.Job) -> None:
        term = spec.pod_specs[
            0
        ].affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.add()
        term.matchExpressions.add(key="zone", operator="Maybe", values=["a"])

    ex = Executor(api.channel)  # nothing is scheduled before its first sync
    bad, good = submit(api, item(), item())
    rewrite_spec(server, bad, maybe)
    ex.wait_leases(1)
    wait_state(api, bad, submit_pb2.FAILED)
    assert ex.lease_of(good).job.id == good
    [reason] = failure_reasons(api, bad)
    assert "Maybe" in reason and "scheduler cannot read" in reason
    assert server.server.storage.isolated_failures["scheduling"] == 1
    scrape, _ = server.server.metrics.exposition(None)
    assert b'armada_isolated_job_failures_total{stage="scheduling"} 1.0' in scrape
    # and scheduling goes on: a later job is placed too
    [later] = submit(api, item())
    ex.wait_leases(2)
    assert ex.lease_of(later).job.id == later


def test_a_job_too_large_for_a_lease_fails_alone(
    server: EmbeddedServer, api: Stubs, queue: str
) -> None:
    ex = Executor(api.channel)  # nothing is scheduled before its first sync
    big, small = submit(api, item(), item())
    rewrite_spec(
        server, big, lambda spec: spec.annotations.update({"blob": "x" * (4 * 1024 * 1024)})
    )
    ex.wait_leases(1)
    wait_state(api, big, submit_pb2.FAILED, executor=ex)
    assert set(r.job.id for r in ex.held.values()) == {small}
    [reason] = failure_reasons(api, big)
    assert "larger than the executor protocol can carry" in reason


@pytest.mark.postgres
def test_a_report_the_database_refuses_fails_its_job_alone(postgres_server) -> None:
    """A pending report whose kubernetes id is longer than its column: PostgreSQL refuses
    the whole sync's transaction; the reports are then applied one by one, and only the job
    of the refused one fails."""
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        scheduling_period=0.1,
        database_url=postgres_server.new_database(),
        lease_timeout=30.0,
        priority_classes=CLASSES,
        default_priority_class="low",
    )
    with EmbeddedServer(config) as server:
        channel = grpc.insecure_channel(server.address)
        api = Stubs(
            channel,
            submit_pb2_grpc.SubmitStub(channel),
            submit_pb2_grpc.QueueServiceStub(channel),
            submit_pb2_grpc.RetryPolicyServiceStub(channel),
            event_pb2_grpc.EventStub(channel),
            job_pb2_grpc.JobsStub(channel),
        )
        api.queues.CreateQueue(submit_pb2.Queue(name="q", priority_factor=1))
        ex = Executor(api.channel)
        first, second = submit(api, item(), item())
        ex.wait_leases(2)
        ex.sync(
            ex.update(
                ex.lease_of(first), pending=executor_pb2.RunUpdate.Pending(kubernetes_id="k" * 1000)
            ),
            ex.update(
                ex.lease_of(second),
                running=executor_pb2.RunUpdate.Running(node=ex.lease_of(second).node),
            ),
        )
        wait_state(api, second, submit_pb2.RUNNING)
        wait_state(api, first, submit_pb2.FAILED)
        [reason] = failure_reasons(api, first)
        assert "could not be stored" in reason
        assert server.server.storage.isolated_failures["executor report"] == 1
        channel.close()


# --- terminating runs hold their nodes ---------------------------------------------------


def test_a_cancelled_run_holds_its_node_until_its_executor_lets_it_go(
    server: EmbeddedServer, api: Stubs, queue: str
) -> None:
    ex = Executor(api.channel, nodes=1, cpu="1")
    ex.sync()
    [first] = submit(
        api, item({"containers": [container(cpu="1")], "terminationGracePeriodSeconds": 60})
    )
    [lease] = ex.wait_leases(1)
    ex.sync(ex.update(lease, running=executor_pb2.RunUpdate.Running(node=lease.node)))
    api.submit.CancelJobs(submit_pb2.JobCancelRequest(queue="q", job_set_id="s", job_ids=[first]))
    wait_state(api, first, submit_pb2.CANCELLED)
    [second] = submit(api, item({"containers": [container(cpu="1")]}))
    # The executor still holds the cancelled run (terminating): the node is not free.
    for _ in range(20):
        ex.sync()
        time.sleep(0.05)
    assert all(held.job.id == first for held in ex.held.values())
    assert any(stop.job_id == first for stop in ex.stops)
    assert "leased" not in kinds(api, second)
    # Its processes ended: the executor no longer holds it, and the node is free again.
    ex.held.pop(lease.run_id)
    ex.wait_leases(1)
    assert ex.lease_of(second).job.id == second


# --- gangs cut short while they wait -------------------------------------------------------


def test_cancelling_a_member_of_a_waiting_gang_fails_the_rest(api: Stubs, queue: str) -> None:
    gang = {ann.GANG_ID: "g", ann.GANG_CARDINALITY: "3"}
    members = submit(api, *[item(annotations=gang) for _ in range(3)])
    api.submit.CancelJobs(
        submit_pb2.JobCancelRequest(queue="q", job_set_id="s", job_ids=members[:1])
    )
    for job_id in members[1:]:
        wait_state(api, job_id, submit_pb2.FAILED)
        [reason] = failure_reasons(api, job_id)
        assert f"gang member {members[0]} was cancelled" in reason


def test_an_elastic_gang_that_loses_a_member_runs_with_the_rest(api: Stubs, queue: str) -> None:
    gang = {ann.GANG_ID: "e", ann.GANG_CARDINALITY: "3", ann.GANG_MINIMUM_CARDINALITY: "2"}
    members = submit(api, *[item(annotations=gang) for _ in range(3)])
    api.submit.CancelJobs(
        submit_pb2.JobCancelRequest(queue="q", job_set_id="s", job_ids=members[:1])
    )
    ex = Executor(api.channel)  # the gang waited for an executor
    leases = ex.wait_leases(2)
    assert {lease.job.id for lease in leases} == set(members[1:])
