"""What the scheduling reports read: the cycles the leader kept (their figures as the cycle
wrote them) and each job's reasons for waiting (`CycleReports`).

A job's reason in force and the cycle it began in are on the job's row; job_reasons keeps
the reasons before it, a row each, written when the reason changes. A backlog's first
reasons, one per queued job, thus cost no rows, and a cycle where nothing changes writes
nothing. Both are bounded: the leader keeps the last `keep` cycles and deletes the earlier
reasons that ended before the oldest of them (a still queued job's history then starts with
the reason in force when the kept cycles begin). Rows live in the database, so whoever leads
next, and every replica, reads the same reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, delete, exists, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import aliased

from armada_core.jobs import JobState
from armada_server.storage import schema as t
from armada_server.storage.base import Transactions
from armada_server.storage.guard import retried


@dataclass(frozen=True)
class CycleRow:
    """One kept cycle: its number, when it began, how long it took, its figures (JSON)."""

    cycle: int
    started_at: datetime
    seconds: float
    report: str


@dataclass(frozen=True)
class WaitingGroup:
    """A queue's queued jobs that wait for one reason: how many, and the oldest of them."""

    reason: str
    count: int
    oldest_job_id: str
    oldest_submitted_at: datetime


def archive_reasons(
    conn: Connection,
    insert: postgresql.Insert | sqlite.Insert,
    rows: Sequence[tuple[str, int, str]],
) -> None:
    """Keep (job id, the cycle it began in, reason) rows of reasons that a job's new reason
    replaces, in the caller's transaction, with `insert` (Transactions.insert of job_reasons).
    A row already kept is left as it is: a cycle number used twice (a leader that died before
    keeping its cycle) must not fail the cycle that writes it again."""
    if rows:
        values = [{"job_id": j, "cycle": c, "reason": r} for j, c, r in rows]
        conn.execute(insert.on_conflict_do_nothing(), values)


class CycleReports:
    """The kept cycles and job reason histories."""

    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions

    def next_cycle(self) -> int:
        """The number of the next cycle: one past any cycle kept or named by a reason, so
        a leader that takes over goes on counting where the last one stopped."""
        with self._tx.read() as conn:
            kept = conn.execute(select(func.max(t.scheduling_cycles.c.id))).scalar()
            named = conn.execute(select(func.max(t.job_reasons.c.cycle))).scalar()
        return max(int(kept or 0), int(named or 0)) + 1

    @retried
    def write_cycle(
        self, cycle: int, started_at: datetime, seconds: float, report: str, *, keep: int
    ) -> None:
        """Keep one cycle's figures and delete what falls out of the last `keep` cycles.
        Reasons are pruned once every `keep` cycles (a larger delete, rarely)."""
        oldest = cycle - keep + 1
        with self._tx.write() as (conn, _):
            conn.execute(
                insert(t.scheduling_cycles).values(
                    id=cycle, started_at=started_at, seconds=seconds, report=report
                )
            )
            conn.execute(delete(t.scheduling_cycles).where(t.scheduling_cycles.c.id < oldest))
            if cycle % keep == 0:
                _prune_reasons(conn, oldest)

    def cycles(self, limit: int) -> list[CycleRow]:
        """The latest `limit` kept cycles, newest first."""
        c = t.scheduling_cycles.c
        with self._tx.read() as conn:
            rows = conn.execute(
                select(c.id, c.started_at, c.seconds, c.report).order_by(c.id.desc()).limit(limit)
            ).all()
        return [CycleRow(int(r.id), r.started_at, float(r.seconds), r.report) for r in rows]

    def history(self, job_id: str) -> list[tuple[int, str]]:
        """A job's reason changes, oldest first: (cycle, new reason; "" once placed)."""
        return self.reasons(job_id)[1]

    def reasons(self, job_id: str) -> tuple[str, list[tuple[int, str]]]:
        """A job's reason in force and its reason changes, read together."""
        c, j = t.job_reasons.c, t.jobs.c
        with self._tx.read(snapshot=True) as conn:
            rows = conn.execute(
                select(c.cycle, c.reason).where(c.job_id == job_id).order_by(c.cycle)
            ).all()
            now = conn.execute(
                select(j.reason_cycle, j.scheduling_reason).where(j.id == job_id)
            ).one_or_none()
        changes = [(int(r.cycle), str(r.reason)) for r in rows]
        if now is None:
            return "", changes
        if now.reason_cycle is not None:
            changes.append((int(now.reason_cycle), str(now.scheduling_reason)))
        return str(now.scheduling_reason), changes

    def waiting(self, queue: str) -> list[WaitingGroup]:
        """A queue's queued jobs grouped by the reason the latest cycle gave them, largest
        group first; jobs no cycle has looked at yet group under ""."""
        j = t.jobs.c
        queued = and_(j.queue == queue, j.state == int(JobState.QUEUED))
        with self._tx.read() as conn:
            groups = conn.execute(
                select(j.scheduling_reason, func.count())
                .where(queued)
                .group_by(j.scheduling_reason)
            ).all()
            out = []
            for group in groups:
                reason, count = str(group[0]), int(group[1])
                first = conn.execute(
                    select(j.id, j.submitted_at)
                    .where(queued, j.scheduling_reason == reason)
                    .order_by(j.submitted_at, j.id)
                    .limit(1)
                ).one()
                out.append(WaitingGroup(reason, count, first.id, first.submitted_at))
        return sorted(out, key=lambda g: (-g.count, g.reason))


def _prune_reasons(conn: Connection, oldest: int) -> None:
    """Delete the earlier reasons that ended before cycle `oldest` (a later one, or the
    job's reason in force, began by then), and every earlier reason of a job no longer
    queued, but for a queued job's reason in force as cycle `oldest` began."""
    r, j = t.job_reasons, t.jobs
    later = aliased(r)
    superseded = exists().where(
        later.c.job_id == r.c.job_id, later.c.cycle > r.c.cycle, later.c.cycle <= oldest
    )
    replaced = exists().where(j.c.id == r.c.job_id, j.c.reason_cycle <= oldest)
    still_queued = exists().where(j.c.id == r.c.job_id, j.c.state == int(JobState.QUEUED))
    conn.execute(delete(r).where(r.c.cycle < oldest, superseded | replaced | ~still_queued))
