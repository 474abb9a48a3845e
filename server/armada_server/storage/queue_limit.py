"""The per-queue limit on waiting jobs (`max_queued_jobs_per_queue`), as a submission checks it.

A submission's transaction settles the count with the queue's row locked, its own new jobs
included, so concurrent submissions cannot pass the limit together. The queue's backlog is
not walked there: a server counts it at most once in RECOUNT_SECONDS, outside any write
transaction, and a submission completes that count with the waiting jobs written since its
change mark (`storage/changes.py`), before its transaction and again in it. Only when the sum
passes the limit is the backlog counted in the transaction, so every decision is the one an
exact count gives. The completed count, with the mark of the transaction that completed it,
is kept once that transaction commits: the next submission to the queue reads only what was
written after it, not everything since the backlog was last counted.
"""

from __future__ import annotations

import time

from sqlalchemy import Connection, Integer, bindparam, func, literal_column, select, text

from armada_core.jobs import JobState
from armada_server.errors import ResourceExhausted
from armada_server.storage import schema as t
from armada_server.storage.base import Transactions
from armada_server.storage.bulk import fetch
from armada_server.storage.changes import mark_column, move_on

#: Jobs waiting to be scheduled, as the limit counts them.
WAITING = (int(JobState.SUBMITTED), int(JobState.QUEUED))
_LOCK_QUEUE = (
    select(t.queues.c.cordoned).where(t.queues.c.name == bindparam("queue")).with_for_update()
)

# The queue's waiting jobs, counted up to a bound (`bound`: the limit + 1) from the (state,
# queue) index alone (selecting a column it lacks, the id, read each job's row: five times as
# long), stopping there.
_WAITING = (
    select(func.count())
    .select_from(
        select(literal_column("1", Integer))
        .where(t.jobs.c.state.in_(WAITING), t.jobs.c.queue == bindparam("queue"))
        .limit(bindparam("bound"))
        .subquery()
    )
    .scalar_subquery()
)
# The queue's waiting jobs written at or after a change mark, found from the index of change
# numbers: what it costs is what changed since the mark, not the queue's backlog. Each
# database is kept off the (state, queue) index, which walks the backlog: SQLite is told the
# index, PostgreSQL reads the recent rows first (a materialised CTE; its planner took the
# other index while its statistics lagged behind a growing backlog).
_RECENT = (
    select(t.jobs.c.queue, t.jobs.c.state)
    .where(t.jobs.c.changed >= bindparam("mark"))
    .cte("recent")
    .prefix_with("MATERIALIZED")
)
_WAITING_SINCE = (
    select(func.count())
    .select_from(_RECENT)
    .where(_RECENT.c.queue == bindparam("queue"), _RECENT.c.state.in_(WAITING))
)
_WAITING_SINCE_SQLITE = text(
    "SELECT (SELECT count(*) FROM jobs INDEXED BY ix_jobs_changed "
    f"WHERE changed >= :mark AND queue = :queue AND state IN {tuple(WAITING)}), "
    "(SELECT n FROM change_clock)"
)
# Seconds a queue's exact count is completed by what was written since, before the next
# submission counts its backlog again: what that adds is a scan of a second's changes.
RECOUNT_SECONDS = 1.0
# Seconds a kept count is completed in the write transaction alone, with no read before it:
# what was written since is little (at 20,000 writes a second, a thousand rows, which cost
# about what a read transaction of its own does), and a queue's busy submitters of small
# requests each save that read.
FRESH_SECONDS = 0.05
#: Per queue: when its backlog was last counted (time.monotonic()), the count kept, its
#: mark, and when that count was kept.
Counts = dict[str, tuple[float, int, int, float]]


def _waiting_since(conn: Connection, queue: str, mark: int) -> tuple[int, int]:
    """The queue's waiting jobs written at or after the change `mark`, and the mark of this
    read's snapshot."""
    if conn.dialect.name == "sqlite":
        [found] = fetch(conn, _WAITING_SINCE_SQLITE, {"queue": queue, "mark": mark})
    else:
        since = select(_WAITING_SINCE.scalar_subquery(), mark_column(conn.dialect.name))
        [found] = fetch(conn, since, {"queue": queue, "mark": mark})
    return int(found[0]), int(found[1])


def counted_before(
    tx: Transactions, queue: str, limit: int, counts: Counts
) -> tuple[int, int] | None:
    """Before the write transaction: at least the queue's waiting jobs, and the change mark of
    the snapshot they were counted in, which the transaction completes with what was written
    since (`refuse_over_limit`); None when they are over the limit already. The backlog
    itself is counted (up to the limit + 1) once in RECOUNT_SECONDS (`counts` keeps it); in
    between, the count is completed with the waiting jobs written since its mark, here
    unless it was kept less than FRESH_SECONDS ago."""
    now = time.monotonic()
    kept = counts.get(queue)
    if kept is not None and now - kept[0] < RECOUNT_SECONDS and now - kept[3] < FRESH_SECONDS:
        return kept[1], kept[2]
    with tx.read() as conn:
        if kept is not None and now - kept[0] < RECOUNT_SECONDS:
            since, mark = _waiting_since(conn, queue, kept[2])
            if kept[1] + since <= limit:
                return kept[1] + since, mark
        [(counted, mark)] = fetch(
            conn, select(_WAITING, mark_column(tx.dialect)), {"queue": queue, "bound": limit + 1}
        )
    if counted > limit:
        return None
    counts[queue] = (now, int(counted), int(mark), now)
    return int(counted), int(mark)


def refuse_over_limit(
    conn: Connection, queue: str, new: int, limit: int, before: tuple[int, int] | None
) -> tuple[int, int] | None:
    """Refuse the `new` jobs just written if they took the queue's waiting jobs (submitted or
    queued, these included) over `limit`. On PostgreSQL the queue's row is locked first, as
    the transaction's last lock: submissions to one queue wait for each other only from here
    to their commit, and each counts the others' committed jobs. A writer on SQLite holds the
    database's one write lock from its BEGIN, which orders them already.

    What was counted `before` the transaction (`counted_before`) plus the waiting jobs
    written since its mark (these new ones among them) is at least what waits now: while that
    is within the limit, the queue's backlog is not counted in the transaction, which on
    SQLite every other writer waits for. Only a queue near its limit is counted here.

    On SQLite the change clock moves on past these jobs, so the next submission's count
    marks its snapshot after them and does not add them again.

    Returns what to keep (`keep`) once the transaction commits: at least the queue's waiting
    jobs, and the mark from which later writes are to be added to it; None when the
    backlog was counted here."""
    if conn.dialect.name != "sqlite":  # SQLite's writer holds the one write lock already
        fetch(conn, _LOCK_QUEUE, {"queue": queue})
    if before is not None:
        counted, mark = before
        since, now_mark = _waiting_since(conn, queue, mark)
        if counted + since <= limit:
            move_on(conn)
            # Every write SQLite stamped below the moved clock is in this snapshot; on
            # PostgreSQL every transaction below the snapshot's mark is.
            return counted + since, now_mark + 1 if conn.dialect.name == "sqlite" else now_mark
    [(waiting,)] = fetch(conn, select(_WAITING), {"queue": queue, "bound": limit + 1})
    if waiting <= limit:  # counted up to limit + 1: over it is "at least"
        move_on(conn)
        return None
    raise ResourceExhausted(
        f"queue {queue!r} has at least {limit + 1 - new} jobs waiting to be scheduled; "
        f"this request's {new} new jobs would take it over the server's "
        f"max_queued_jobs_per_queue limit of {limit}: wait for jobs to start or end, or "
        f"cancel some"
    )


def keep(counts: Counts, queue: str, completed: tuple[int, int] | None) -> None:
    """After a submission's commit: the count it completed (`refuse_over_limit`) replaces the
    queue's kept one, which then needs only what was written after it. The time of the last
    count of the backlog stays: a completed count only grows (jobs that left the waiting
    states are not taken off), so the backlog is still counted again in RECOUNT_SECONDS."""
    kept = counts.get(queue)
    if completed is not None and kept is not None:
        counts[queue] = (kept[0], *completed, time.monotonic())
