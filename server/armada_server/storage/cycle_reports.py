"""What the scheduling reports read: the cycles the leader kept (their figures as the cycle
wrote them) and each job's reasons for waiting, one row per change (`CycleReports`).

Both are bounded: the leader keeps the last `keep` cycles and deletes the reasons recorded
before the oldest of them, but for the one a still queued job waits for (its history then
starts with the reason in force when the kept cycles begin). Rows live in the database, so
whoever leads next, and every replica, reads the same reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, delete, exists, func, insert, select
from sqlalchemy.orm import aliased

from armada_core.jobs import JobState
from armada_server.storage import schema as t
from armada_server.storage.base import Transactions
from armada_server.storage.bulk import insert_rows
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


def record_reason_changes(conn: Connection, cycle: int, changes: Sequence[tuple[str, str]]) -> None:
    """Add (job id, new reason) rows for `cycle`, in the caller's transaction: the caller
    passes only jobs whose reason changed (scheduling_writes.py)."""
    if changes:
        insert_rows(
            conn, t.job_reasons, [{"job_id": j, "cycle": cycle, "reason": r} for j, r in changes]
        )


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
        c = t.job_reasons.c
        with self._tx.read() as conn:
            rows = conn.execute(
                select(c.cycle, c.reason).where(c.job_id == job_id).order_by(c.cycle)
            ).all()
        return [(int(r.cycle), str(r.reason)) for r in rows]

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
    """Delete reasons recorded before cycle `oldest`, but for the latest such reason of a
    job still queued (the reason it waits for as the kept cycles begin)."""
    r = t.job_reasons
    later = aliased(r)
    superseded = exists().where(
        later.c.job_id == r.c.job_id, later.c.cycle > r.c.cycle, later.c.cycle <= oldest
    )
    still_queued = exists().where(t.jobs.c.id == r.c.job_id, t.jobs.c.state == int(JobState.QUEUED))
    conn.execute(delete(r).where(r.c.cycle < oldest, superseded | ~still_queued))
