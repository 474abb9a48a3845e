"""A lease expires only when its executor has really been silent for the lease timeout.

The executor's pods fence themselves a quarter of the lease timeout before the server may
expire their leases (docs/server.md, "Fencing"); that holds only if the expiry never takes a
run from an executor whose sync is renewing it. A sync's first statement renews the executor's
row; on PostgreSQL's READ COMMITTED, an expiry that read the row without waiting for that
sync's transaction saw the old time, failed the runs, and the sync still answered the executor
that the runs were its own: the executor renewed its pods' heartbeat, kept them running, and
the job's next run started beside them.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import update

from armada_core.api import executor_pb2
from armada_server.storage import Storage
from armada_server.storage import schema as t

from ..jobs.factories import item
from .test_held_jobs import Clock, leader, pod, two_replicas

LEASE_TIMEOUT = 4.0
NODES = [executor_pb2.Node(name="n0", allocatable={"cpu": "4", "memory": "16Gi"})]


@pytest.fixture
def replicas(database_url: str) -> Iterator[tuple[Storage, Storage, Clock]]:
    yield from two_replicas(database_url)


def sync(
    storage: Storage, runs: list[str], *updates: executor_pb2.RunUpdate
) -> executor_pb2.SyncResponse:
    request = executor_pb2.SyncRequest(
        executor_id="e1", pool="default", nodes=NODES, run_ids=runs, updates=updates
    )
    return storage.executors.executor_sync(request)


def test_an_expiry_waits_for_a_sync_renewing_the_lease_and_then_keeps_it(
    replicas: tuple[Storage, Storage, Clock],
) -> None:
    first, second, clock = replicas
    sync(first, [])
    [job] = first.submissions.submit("a", "s", [item(pod(1, random.Random(1)))], owner="u")
    leader(first, clock).cycle()
    [lease] = sync(first, []).leases
    running = executor_pb2.RunUpdate(
        run_id=lease.run_id, job_id=job, running=executor_pb2.RunUpdate.Running(node="n0")
    )
    sync(first, [lease.run_id], running)

    # The executor was away for longer than the lease timeout; its sync now arrives at the
    # second replica, which has renewed the executor's row and not committed yet.
    clock.now += timedelta(seconds=LEASE_TIMEOUT + 1)
    expired: list[list[str]] = []
    with second.engine.connect() as renewing:
        transaction = renewing.begin()
        renewing.execute(
            update(t.executors).where(t.executors.c.id == "e1").values(last_seen=clock.now)
        )
        expiry = threading.Thread(
            target=lambda: expired.append(first.leases.expire_leases(timeout=LEASE_TIMEOUT))
        )
        expiry.start()
        expiry.join(0.5)  # it waits for the renewal (or, before this was fixed, did not)
        transaction.commit()
    expiry.join(30)
    assert expired == [[]]
    assert [s.run_id for s in sync(second, [lease.run_id]).stop] == []
    [after] = first.job_reads.jobs([job])
    assert [r.id for r in after.runs] == [lease.run_id] and after.active_run is not None


def test_an_expiry_and_a_sync_take_their_rows_in_one_order(
    replicas: tuple[Storage, Storage, Clock], caplog: pytest.LogCaptureFixture
) -> None:
    """A sync takes its executor's row, then its runs'; an expiry waiting for that executor
    must hold no run's row meanwhile (here one whose grace to terminate has run out, which
    every expiry clears), or the two wait on each other until PostgreSQL breaks the deadlock
    by failing one of them (the expiry, retried, then succeeds: its retry is what shows)."""
    caplog.set_level(logging.INFO, logger="armada_server")
    first, second, clock = replicas
    sync(first, [])
    [job] = first.submissions.submit("a", "s", [item(pod(1, random.Random(2)))], owner="u")
    leader(first, clock).cycle()
    [lease] = sync(first, []).leases
    with first.engine.begin() as conn:
        conn.execute(
            update(t.runs)
            .where(t.runs.c.id == lease.run_id)
            .values(releases_at=clock.now - timedelta(seconds=1))
        )

    clock.now += timedelta(seconds=LEASE_TIMEOUT + 1)
    outcome: list[object] = []

    def expire() -> None:
        try:
            outcome.append(first.leases.expire_leases(timeout=LEASE_TIMEOUT))
        except Exception as e:  # the deadlock's victim, asserted below
            outcome.append(e)

    with second.engine.connect() as syncing:
        transaction = syncing.begin()
        syncing.execute(
            update(t.executors).where(t.executors.c.id == "e1").values(last_seen=clock.now)
        )
        expiry = threading.Thread(target=expire)
        expiry.start()
        expiry.join(0.5)  # waiting for the executor's row
        # The sync goes on to its runs' rows, as a report of them does.
        syncing.execute(update(t.runs).where(t.runs.c.id == lease.run_id).values(node="n0"))
        transaction.commit()
    expiry.join(30)
    assert outcome == [[]]
    retries = [r.getMessage() for r in caplog.records if "trying again" in r.getMessage()]
    assert retries == []
    [after] = first.job_reads.jobs([job])
    assert after.active_run is not None and after.active_run.id == lease.run_id


def test_an_expiry_with_nothing_due_takes_no_write_transaction(
    replicas: tuple[Storage, Storage, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every cycle runs the expiry first. While no executor is silent and no run's grace has
    run out, it only reads: on SQLite a write transaction waits for every other writer."""
    first, _, clock = replicas
    sync(first, [])
    [job] = first.submissions.submit("a", "s", [item(pod(1, random.Random(3)))], owner="u")
    leader(first, clock).cycle()
    [lease] = sync(first, []).leases
    writes: list[str] = []
    write = first.transactions.write

    def counted() -> object:
        writes.append("write")
        return write()

    monkeypatch.setattr(first.transactions, "write", counted)
    assert first.leases.expire_leases(timeout=LEASE_TIMEOUT) == []
    assert writes == []

    # A run whose grace ran out is let go of in a write; the executor is not stale.
    with first.engine.begin() as conn:
        conn.execute(
            update(t.runs)
            .where(t.runs.c.id == lease.run_id)
            .values(releases_at=clock.now - timedelta(seconds=1))
        )
    assert first.leases.expire_leases(timeout=LEASE_TIMEOUT) == []
    assert writes == ["write"]
    with first.engine.connect() as conn:
        released = conn.execute(t.runs.select().where(t.runs.c.id == lease.run_id)).one()
    assert released.releases_at is None

    # A silent executor's runs expire.
    clock.now += timedelta(seconds=LEASE_TIMEOUT + 1)
    assert first.leases.expire_leases(timeout=LEASE_TIMEOUT) == [job]
    assert writes == ["write", "write"]
    [after] = first.job_reads.jobs([job])
    assert after.active_run is None
