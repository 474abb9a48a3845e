"""Retention: jobs that ended long enough ago go, with everything that hangs off them.

A job that ended (SUCCEEDED, FAILED, PREEMPTED, CANCELLED, REJECTED) before the cut-off is
deleted with its runs, its events, its reasons for waiting and, once no job of them is left,
its task's lock row and its job set's row, so a job set whose events are all gone reads like
one that never existed. A job of a gang goes only with its whole gang: while one member is
live or ended after the cut-off, every member stays.

Each `prune_batch` is one short transaction over at most `batch` jobs (found through
ix_jobs_finished, their events through ix_events_job_id), so a scheduling cycle or an
executor's sync waits at most one batch for the write lock. On PostgreSQL a batch first takes
a transaction-level advisory lock without waiting: one replica prunes at a time, and the
others skip their turn instead of deleting the same rows under each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime

from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Integer,
    TextClause,
    and_,
    bindparam,
    delete,
    exists,
    not_,
    select,
    text,
)

from armada_server.storage import schema as t
from armada_server.storage.base import Transactions

PRUNE_LOCK_KEY = 0x41524D505255  # "ARMPRU": one pruning replica at a time


@dataclass
class Pruned:
    """Rows one prune deleted, by table."""

    jobs: int = 0
    runs: int = 0
    events: int = 0
    reasons: int = 0
    job_sets: int = 0
    task_locks: int = 0

    def add(self, other: Pruned) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class Retention:
    """Deletes jobs that ended before a cut-off, a batch per transaction."""

    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions

    def prune_batch(self, cutoff: datetime, batch: int) -> Pruned | None:
        """Delete up to `batch` jobs that ended before `cutoff` and what hangs off them, in
        one transaction; None when another replica is pruning (PostgreSQL)."""
        if batch < 1:
            raise ValueError(f"prune batch: must be at least 1, got {batch}")
        with self._tx.write() as (conn, _):
            if (
                self._tx.dialect == "postgresql"
                and not conn.execute(
                    text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": PRUNE_LOCK_KEY}
                ).scalar()
            ):
                return None
            rows = conn.execute(
                _prunable(self._tx.dialect), {"cutoff": cutoff, "batch": batch}
            ).all()
            if not rows:
                return Pruned()
            ids = [r.id for r in rows]
            pruned = Pruned(
                events=_delete_in(conn, t.events.c.job_id, ids),
                reasons=_delete_in(conn, t.job_reasons.c.job_id, ids),
                runs=_delete_in(conn, t.runs.c.job_id, ids),
                jobs=_delete_in(conn, t.jobs.c.id, ids),
            )
            pruned.job_sets = _forget_job_sets(conn, {(r.queue, r.job_set) for r in rows})
            tasks = {(r.queue, r.task) for r in rows if r.task is not None}
            pruned.task_locks = _forget_task_locks(conn, tasks, cutoff)
        return pruned

    def prune(self, cutoff: datetime, batch: int) -> Pruned:
        """Every job that ended before `cutoff`, batch after batch (the command's prune: the
        server's own pruning pauses between batches instead, see armada_server.pruning)."""
        total = Pruned()
        while (done := self.prune_batch(cutoff, batch)) is not None:
            total.add(done)
            if done.jobs < batch:
                break
        return total


# The oldest jobs that ended before the cut-off, but for gangs with a member that has not
# ended or ended since (a NULL gang_id matches no member), and jobs with a run still keeping
# its node (releases_at). SQLite is told to walk ix_jobs_finished (in order: no sort of every
# ended job for one batch); PostgreSQL does so by its statistics (autovacuum's analyze).
_PRUNABLE = f"""
SELECT j.id, j.queue, j.job_set, j.task FROM jobs AS j {{hint}}
WHERE {t.ended("j")} AND j.last_transition_at < :cutoff
AND NOT EXISTS (
    SELECT 1 FROM jobs AS g WHERE g.gang_id = j.gang_id AND g.queue = j.queue
    AND (NOT {t.ended("g")} OR g.last_transition_at >= :cutoff))
AND NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.job_id = j.id AND r.releases_at >= :cutoff)
ORDER BY j.last_transition_at LIMIT :batch
"""


def _prunable(dialect: str) -> TextClause:
    hint = "INDEXED BY ix_jobs_finished" if dialect == "sqlite" else ""
    return text(_PRUNABLE.format(hint=hint)).bindparams(
        bindparam("cutoff", type_=DateTime(timezone=True)), bindparam("batch", type_=Integer)
    )


def _delete_in(conn: Connection, column: Column[str], ids: Sequence[str]) -> int:
    return conn.execute(delete(column.table).where(column.in_(ids))).rowcount


def _forget_job_sets(conn: Connection, keys: set[tuple[str, str]]) -> int:
    """Delete the rows of job sets left without events or jobs. A row is deleted only at the
    number it was read with: a writer appending to the set meanwhile has moved it on (and
    PostgreSQL re-checks a row another transaction changed), so its numbers never restart
    under events it wrote."""
    s, e, j = t.job_sets, t.events, t.jobs
    forgotten = 0
    for queue, name in sorted(keys):
        last = conn.execute(
            select(s.c.last_seq).where(s.c.queue == queue, s.c.name == name)
        ).scalar_one_or_none()
        if last is None:
            continue
        forgotten += conn.execute(
            delete(s).where(
                s.c.queue == queue,
                s.c.name == name,
                s.c.last_seq == last,
                not_(exists().where(e.c.queue == queue, e.c.job_set == name)),
                not_(exists().where(j.c.queue == queue, j.c.job_set == name)),
            )
        ).rowcount
    return forgotten


def _forget_task_locks(conn: Connection, tasks: set[tuple[str, str]], cutoff: datetime) -> int:
    """Delete the lock rows of tasks left without jobs, last locked before `cutoff` (a
    submission locking the task now moves locked_at on, and keeps its row)."""
    lk, j = t.task_locks, t.jobs
    forgotten = 0
    for queue, task in sorted(tasks):
        forgotten += conn.execute(
            delete(lk).where(
                lk.c.queue == queue,
                lk.c.task == task,
                lk.c.locked_at < cutoff,
                not_(exists().where(and_(j.c.queue == queue, j.c.task == task))),
            )
        ).rowcount
    return forgotten
