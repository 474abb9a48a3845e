"""The queued and running jobs the scheduling leader holds between cycles.

Reading every queued job each cycle cost a cycle seconds at a backlog of a million jobs, to
find the few thousand that changed. The leader instead keeps what its last read found and
reads only the jobs whose change number (storage/changes.py) says they changed since: a new
job, a lease, a cancel, a report of an executor, whichever replica wrote it. It reads
everything again when it comes to lead, after a read that failed, and every
`FULL_READ_EVERY` as a net under writes made outside the server. That net is timed on the
process's own clock, not the server's: writes from outside come in real time, also when the
what-if simulator runs the server's clock hundreds of times faster.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from sqlalchemy import Connection, select

from armada_core.scheduling import Reasons
from armada_server.storage import changes
from armada_server.storage import schema as t
from armada_server.storage.base import Transactions
from armada_server.storage.bulk import fetch
from armada_server.storage.changes import FULL_READ_EVERY
from armada_server.storage.scheduling_reads import (
    CHANGED_SINCE_MARK,
    GangKey,
    QueuedJob,
    RunningJob,
    queued_jobs,
    running_jobs,
)

#: Reason -> the ids of the queued jobs held with it (HeldJobs.settled).
Settled = dict[str, set[str]]


@dataclass
class HeldJobs:
    """What the last read found, by job id, and where the next read starts (`mark`)."""

    mark: int | None = None  # None: read everything next
    # Where the last read started (None: it read everything): it read what changed from
    # `since` to `mark`, the jobs `changed`.
    since: int | None = None
    full_read_at: float | None = None  # time.monotonic()
    queued: dict[str, QueuedJob] = field(default_factory=dict)  # retry delays included
    running: dict[str, RunningJob] = field(default_factory=dict)
    # Members of pod groups whose ended members a cycle reads (scheduling_reads).
    members: dict[str, GangKey] = field(default_factory=dict)
    # The jobs the last read found changed (None: it read everything).
    changed: list[str] | None = None
    # The queued jobs a retry delay still holds back (of `queued`): the others are due.
    delayed: dict[str, QueuedJob] = field(default_factory=dict)
    # By reason, the ids of jobs `queued` holds with that reason: what the last cycle that
    # wrote its reasons noted, less every job read again since (rows change only so). None:
    # a cycle compares every job's reason (scheduling_writes.changed_reasons).
    settled: Settled | None = None

    def forget(self) -> None:
        """Let go of everything (another replica leads): the next read reads everything."""
        self.mark = self.since = None
        self.changed = None
        self.settled = None
        self.queued.clear()
        self.running.clear()
        self.members.clear()
        self.delayed.clear()

    def refresh(
        self, conn: Connection, now: datetime
    ) -> tuple[list[QueuedJob], Collection[RunningJob], set[GangKey]]:
        """Bring what is held up to date in the read transaction `conn` (a snapshot); returns
        the queued jobs due by `now` and the running ones, each sorted by id, and the pod
        groups whose ended members the cycle reads. The running jobs are a view of what is
        held, not a copy (a cycle whose views are patched never walks them): it follows what
        is held, so read it before the next refresh."""
        try:
            self._refresh(conn)
        except BaseException:
            self.forget()  # half brought up to date: start again from nothing
            raise
        queued = self.queued.values()
        for job_id in [
            k for k, j in self.delayed.items() if not (j.retry_after and j.retry_after > now)
        ]:
            del self.delayed[job_id]  # due from now on: no longer checked each cycle
        if self.delayed:
            due = [j for j in queued if j.retry_after is None or j.retry_after <= now]
        else:
            due = list(queued)  # in C: a backlog's jobs are all due but for retries
        return due, self.running.values(), set(self.members.values())

    def count(self) -> int:
        """How many jobs are held."""
        return len(self.queued) + len(self.running)

    def reads_everything(self) -> bool:
        """Whether the next read reads every job again."""
        return (
            self.mark is None
            or self.full_read_at is None
            or time.monotonic() - self.full_read_at >= FULL_READ_EVERY
        )

    def _refresh(self, conn: Connection) -> None:
        mark = changes.mark(conn)
        self.since = None
        if self.reads_everything():
            self.forget()
            self.full_read_at = time.monotonic()
            self.changed = None
            queued = queued_jobs(conn, self.members)
            running = running_jobs(conn, self.members)
            self.queued = _renewed(self.queued, queued, ())
            self.running = _renewed(self.running, running, ())
        else:
            changed = [r[0] for r in fetch(conn, _CHANGED_SINCE, {"mark": self.mark})]
            self.changed = changed
            self.let_go(changed)
            # One statement each, led by the change number's index (the state kept
            # off its index, which SQLite would walk whole); in this snapshot it finds the
            # same jobs as `changed`. Lists of ids cost more to send than to read.
            queued = queued_jobs(conn, self.members, since=self.mark)
            running = running_jobs(conn, self.members, since=self.mark)
            self.queued = _renewed(self.queued, queued, changed)
            self.running = _renewed(self.running, running, changed)
            self.since = self.mark
        self.delayed.update((j.id, j) for j in queued if j.retry_after is not None)
        self.mark = mark

    def let_go(self, changed: list[str]) -> None:
        """Forget the pod groups, retry delays and settled reasons of the jobs that changed:
        the read reads them again (their rows are renewed in place, see `_renewed`)."""
        for job_id in changed:
            self.members.pop(job_id, None)
            self.delayed.pop(job_id, None)
        for ids in (self.settled or {}).values():
            ids.difference_update(changed)

    def note_reasons(self, reasons: Reasons, cycle: int | None, settled: Settled | None) -> None:
        """The reasons a cycle wrote for the jobs it left queued (writing a reason leaves
        the job's change number as it was: see scheduling_writes._write_reason), and which
        jobs are held with each reason since (`settled`)."""
        self.settled = settled
        queued = self.queued
        for reason, job_ids in reasons.groups().items():
            for job_id in job_ids:
                job = queued.get(job_id)
                if job is not None and job.reason != reason:
                    # In place: the job's object stays the one its view was made from (a
                    # reason is no part of the view; scheduling/snapshot.py _Views).
                    object.__setattr__(job, "reason", reason)
                    object.__setattr__(job, "reason_cycle", cycle)

    def move_on(self, transactions: Transactions) -> None:
        """Before a read: writes after it stamp its mark or more, and the writes before it
        less (on SQLite; see storage/changes.py)."""
        if transactions.dialect == "sqlite":
            with transactions.write() as (conn, _):
                changes.move_on(conn)


_Job = TypeVar("_Job", QueuedJob, RunningJob)

# The jobs changed since a mark (built once: SQLAlchemy works out a statement's cache key
# once per object, and every cycle reads this).
_CHANGED_SINCE = select(t.jobs.c.id).where(CHANGED_SINCE_MARK)


def _renewed(
    held: dict[str, _Job], read: Sequence[_Job], changed: Sequence[str]
) -> dict[str, _Job]:
    """`held`, in order of id, with the `changed` jobs as `read` (those not read dropped).
    A job read again keeps its place; ids grow with submission time, so jobs new to `held`
    mostly come after every held one and are added in place. Else all is sorted again."""
    by_id = {j.id: j for j in read}
    for job_id in changed:
        if job_id not in by_id:
            held.pop(job_id, None)
    if not held:
        return dict(sorted(by_id.items()))
    new = sorted(k for k in by_id if k not in held)
    last = next(reversed(held))
    held.update(by_id)  # those held already keep their places
    if new and new[0] < last:
        return dict(sorted(held.items()))
    for job_id in new:  # at the end, in order
        held[job_id] = held.pop(job_id)
    return held
