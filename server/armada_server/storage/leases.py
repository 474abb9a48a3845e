"""How runs end when their executor does not report the end: leases that expire, pods an
executor no longer has, jobs the server fails alone, and runs that hold their node until
their executor lets go of them.

A failed run goes through the retry engine (`retries.Retries`); a gang whose member is
retried restarts together (`gangs.restart_gangs`), in the same transaction.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Select, bindparam, exists, select, text, update
from sqlalchemy.exc import DBAPIError

from armada_core.jobs import Failure, Job, lifecycle
from armada_core.jobs.lifecycle import EventMessage, IllegalTransition
from armada_server.storage import schema as t
from armada_server.storage.base import Change, JobSetKey, Transactions, clean_reason
from armada_server.storage.bulk import execute, fetch
from armada_server.storage.gangs import restart_gangs
from armada_server.storage.guard import retried
from armada_server.storage.retries import Catalogue, Retries, run_failure
from armada_server.storage.rows import chunks, jobs_by_id

log = logging.getLogger("armada_server")

# The runs of an executor that keep their node's capacity until it no longer holds them.
_RELEASING = select(t.runs.c.id).where(
    t.runs.c.cluster_id == bindparam("executor"), t.runs.c.releases_at.is_not(None)
)

# Executors silent since a cutoff, locked (see expire_leases), and the runs whose grace to
# terminate ended by now: every cycle runs both.
_STALE_EXECUTORS = (
    select(t.executors.c.id)
    .where(t.executors.c.last_seen < bindparam("cutoff"))
    .order_by(t.executors.c.id)
    .with_for_update()
)
_RELEASED = (
    update(t.runs)
    .where(t.runs.c.releases_at.is_not(None), t.runs.c.releases_at < bindparam("now"))
    .values(releases_at=None)
)
# Whether either has anything to do, read first: a cycle that finds neither (most cycles)
# takes no write transaction, which on SQLite waits for every other writer and they for it.
_DUE = select(
    exists().where(t.executors.c.last_seen < bindparam("cutoff")),
    exists().where(t.runs.c.releases_at.is_not(None), t.runs.c.releases_at < bindparam("now")),
)


def active_runs_of(executors: Sequence[str]) -> Select[Any]:
    """The jobs of the executors' active runs, read through ix_runs_active."""
    return select(t.runs.c.job_id).where(
        t.runs.c.cluster_id.in_(executors), text(t.active_run("runs"))
    )


class Leases:
    """Ends of runs the server decides, and the node capacity that ended runs still hold.

    `isolated_failures` counts the jobs failed alone because processing them raised, by
    where (shared by the storage's parts; the metrics report it)."""

    def __init__(
        self,
        transactions: Transactions,
        retries: Retries,
        isolated_failures: Counter[str],
    ) -> None:
        self._tx = transactions
        self.retries = retries
        self.isolated_failures = isolated_failures

    @retried
    def expire_leases(self, *, timeout: float, now: datetime | None = None) -> list[str]:
        """Runs of executors silent for longer than `timeout` seconds fail as lease-expired."""
        now = now or self._tx.clock()
        cutoff = now - timedelta(seconds=timeout)
        with self._tx.read() as conn:
            [(stale_found, released_found)] = fetch(conn, _DUE, {"cutoff": cutoff, "now": now})
        if not (stale_found or released_found):
            return []  # an executor goes stale only as time passes: a later cycle expires it
        with self._tx.write() as (conn, touched):
            # Locked: a sync renewing one of these rows (its first statement) is waited for,
            # and its executor is then no longer stale. Without the lock, READ COMMITTED read
            # the old time, the runs expired, and the sync still told the executor they were
            # its own: their pods went on beside the jobs' next runs. Taken before any run's
            # row, as a sync takes its executor's: the same order, no deadlock.
            stale = [r[0] for r in fetch(conn, _STALE_EXECUTORS, {"cutoff": cutoff})]
            # Runs whose grace to terminate has run out no longer hold their nodes.
            execute(conn, _RELEASED, {"now": now})
            if not stale:
                return []
            jobs: list[str] = list(conn.execute(active_runs_of(stale)).scalars())
            if jobs:
                self.fail_lost(conn, touched, jobs, "lease expired", "lease_expired", now)
            return jobs

    def fail_lost(
        self,
        conn: Connection,
        touched: set[JobSetKey],
        job_ids: Sequence[str],
        reason: str,
        subcategory: str,
        now: datetime,
    ) -> None:
        """The active runs of `job_ids` are lost (their lease expired, or their executor no
        longer has their pods): each is retried or fails, as the retry engine decides."""
        catalogue = Catalogue.load(conn)
        changes: list[Change] = []
        for job in jobs_by_id(conn, job_ids).values():
            run = job.active_run
            if run is None:
                continue
            try:
                after, events = self._lose(conn, catalogue, job, reason, subcategory, now)
            except IllegalTransition as e:
                log.info("job %s: no %s: %s", job.id, subcategory, e)
                continue
            except DBAPIError:
                raise  # the database aborted the transaction: all of it is tried again
            except Exception as e:  # one job must not stop every cycle's lease expiry
                after, events = self.isolate(
                    job, subcategory, f"its {subcategory} could not be processed", e, now
                )
            changes.append((job, after, events))
        restarts, more = restart_gangs(conn, changes, now)
        # The executor said it no longer has these runs: they hold no node (pod_missing).
        confirmed = (
            set()
            if subcategory == "lease_expired"
            else {job.active_run.id for job, _, _ in changes if job.active_run is not None}
        )
        self._tx.save_many(
            conn,
            touched,
            changes + restarts,
            [e for _, _, events in changes for e in events] + more,
            confirmed=confirmed,
        )

    def _lose(
        self,
        conn: Connection,
        catalogue: Catalogue,
        job: Job,
        reason: str,
        subcategory: str,
        now: datetime,
    ) -> tuple[Job, list[EventMessage]]:
        """One lost run's end, retried or not."""
        run = job.active_run
        assert run is not None
        failure = Failure(reason=reason, category="internal", subcategory=subcategory)
        decision = self.retries.decide(
            conn,
            catalogue,
            job,
            run_failure(job, failure, node=run.node, returned_lease=True),
            now,
        )
        if subcategory == "lease_expired":
            return lifecycle.expire_lease(
                job, retry=decision.retry, now=now, retry_after=decision.retry_after
            )
        return lifecycle.fail(
            job, failure, retry=decision.retry, now=now, retry_after=decision.retry_after
        )

    def isolate(
        self, job: Job, stage: str, what: str, error: Exception, now: datetime
    ) -> tuple[Job, list[EventMessage]]:
        """Fail `job` alone for an error its processing raised, so that everyone else's
        work goes on; the reason names the problem (counted by `stage` in a metric)."""
        log.error("job %s: %s", job.id, what, exc_info=error)
        self.isolated_failures[stage] += 1
        failure = Failure(
            reason=clean_reason(f"{what}: {type(error).__name__}: {error}"),
            category="internal",
            subcategory="server_error",
        )
        return lifecycle.fail(job, failure, retry=False, now=now)

    def fail_alone(
        self,
        conn: Connection,
        touched: set[JobSetKey],
        failures: Mapping[str, str],
        subcategory: str,
        still: Callable[[Job], bool],
        now: datetime,
        *,
        confirmed: bool = False,
    ) -> int:
        """Fail each job of `failures` with its reason, for good, if it is `still` as the
        failure was decided on; returns how many were failed. `confirmed`: their runs hold
        nothing on their nodes."""
        changes: list[Change] = []
        for job in jobs_by_id(conn, failures).values():
            if not still(job):
                continue
            failure = Failure(
                reason=clean_reason(failures[job.id]), category="internal", subcategory=subcategory
            )
            changes.append((job, *lifecycle.fail(job, failure, retry=False, now=now)))
        self._tx.save_many(
            conn,
            touched,
            changes,
            confirmed={
                job.active_run.id
                for job, _, _ in changes
                if confirmed and job.active_run is not None
            },
        )
        return len(changes)

    @retried
    def fail_now(
        self,
        failures: Mapping[str, str],
        subcategory: str,
        still: Callable[[Job], bool],
        now: datetime,
    ) -> int:
        """fail_alone in a transaction of its own."""
        with self._tx.write() as (conn, touched):
            return self.fail_alone(conn, touched, failures, subcategory, still, now)

    def release(self, conn: Connection, executor: str, held: AbstractSet[str]) -> None:
        """Runs the server stopped keep their node's capacity until their executor no
        longer holds them (it has seen them end); from then on the node is free."""
        releasing = fetch(conn, _RELEASING, {"executor": executor})
        ended = [r for (r,) in releasing if r not in held]
        for chunk in chunks(ended, 500):
            conn.execute(update(t.runs).where(t.runs.c.id.in_(chunk)).values(releases_at=None))
