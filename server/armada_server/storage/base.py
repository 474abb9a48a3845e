"""What every part of storage shares: its transactions, appending to the event log, and
writing job transitions.

Each part (queues, submissions, executor syncs, ...) holds the one `Transactions` of its
storage and opens its transactions through it. A step that is part of a larger transaction
(a sync's lease expiry, a cycle's gang restarts) takes the caller's connection instead, so one
RPC or one scheduling cycle still commits exactly once.

Job changes go through armada_core.jobs.lifecycle, and `save_many` writes them with their
events in the same transaction: the event log and the tables never disagree. A cycle's
leases, the one transition made by the tens of thousands, are built without loading their
jobs (`lifecycle.lease_queued`) and written in bulk by scheduling_writes.py, their events
appended here with the cycle's others; so are a sync's plain reports of runs pending,
running and succeeded (`lifecycle.report_live`, live_reports.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy import Connection, Engine, Table, bindparam, insert, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DataError

from armada_core.jobs import Job, JobState, Run, RunState
from armada_core.jobs.grace import grace_period_seconds
from armada_core.jobs.lifecycle import EventMessage
from armada_core.jobs.text import MAX_FAILURE_TEXT, clean_text
from armada_server.errors import InvalidArgument
from armada_server.storage import schema as t
from armada_server.storage.bulk import (
    FEW_ROWS,
    NewRows,
    execute_sql,
    executemany,
    fetch_sql,
    insert_numbered,
    placeholder,
    sqlite_value,
)
from armada_server.storage.database import begin_write
from armada_server.storage.guard import Conflict
from armada_server.storage.notify import NOTIFY_RETURNED
from armada_server.storage.rows import chunks, mutable_job_row, run_row

JobSetKey = tuple[str, str]  # (queue, job set)
# A job before and after a transition, and the events that record it.
Change = tuple[Job, Job, list[EventMessage]]

ACTIVE_JOB_STATES = (JobState.LEASED, JobState.PENDING, JobState.RUNNING)
ACTIVE_RUN_STATES = (int(RunState.LEASED), int(RunState.PENDING), int(RunState.RUNNING))
# A run stopped by the server (cancelled, restarted with its gang, expired) keeps its node's
# capacity for its grace period plus this long (the executor hears of the stop at its next
# sync, then kills), unless its executor says sooner that it no longer holds the run.
RELEASE_SLACK = timedelta(seconds=10)


def utcnow() -> datetime:
    return datetime.now(UTC)


def clean_reason(text: str) -> str:
    """A failure reason as it is stored: clean text, bounded."""
    return clean_text(text, MAX_FAILURE_TEXT)


# Job sets whose message numbers one statement takes: four parameters each, well within
# SQLite's 32,766 and PostgreSQL's 65,535.
NUMBERED_AT_ONCE = 500
# (dialect, job sets) -> the statement taking their numbers (`Transactions._take_numbers`).
_NUMBERING: dict[tuple[str, int], str] = {}
# (job sets, events) -> the statement numbering and writing them (`Transactions._append_few`).
_NUMBERED_FEW: dict[tuple[int, int], str] = {}


def _numbering(dialect: str, sets: int) -> str:
    """The statement adding to `sets` job sets' last numbers (their rows made if new, locked
    to the transaction's end), returning each set's new last number; on PostgreSQL it also
    sends the sets' notifications, at commit (notify.py)."""
    sql = _NUMBERING.get((dialect, sets))
    if sql is None:
        mark = placeholder(dialect)
        values = ", ".join([f"({mark}, {mark}, {mark}, {mark})"] * sets)
        sql = _NUMBERING[(dialect, sets)] = (
            f"INSERT INTO job_sets (queue, name, last_seq, created_at) VALUES {values} "
            "ON CONFLICT (queue, name) DO UPDATE "
            "SET last_seq = job_sets.last_seq + excluded.last_seq "
            "RETURNING queue, name, last_seq"
            + (f", {NOTIFY_RETURNED}" if dialect == "postgresql" else "")
        )
    return sql


class Transactions:
    """The database as every part of storage uses it: one transaction per call.

    `on_commit` is called with the job sets that got new events, after their transaction
    committed: the event hub wakes watchers from it (the web UI's live feed wraps it)."""

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], datetime] = utcnow,
        on_commit: Callable[[set[JobSetKey]], None] | None = None,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.on_commit = on_commit
        self.dialect = engine.dialect.name
        # SQLite allows one writer; queueing writers here is cheaper than on its busy lock.
        self._write_lock = threading.Lock() if self.dialect == "sqlite" else None

    @contextmanager
    def write(self) -> Iterator[tuple[Connection, set[JobSetKey]]]:
        """A write transaction, and the set its steps add the job sets they appended to."""
        touched: set[JobSetKey] = set()
        if self._write_lock is not None:
            self._write_lock.acquire()
        try:
            with self.engine.connect() as conn, begin_write(conn):
                yield conn, touched
        except DataError as e:
            raise invalid(e) from None
        finally:
            if self._write_lock is not None:
                self._write_lock.release()
        if touched and self.on_commit is not None:
            self.on_commit(touched)

    @contextmanager
    def read(self, *, snapshot: bool = False) -> Iterator[Connection]:
        """A read transaction; with `snapshot`, every statement in it sees the same committed
        state (SQLite's read transactions always do; PostgreSQL needs REPEATABLE READ)."""
        try:
            with self.engine.connect() as conn:
                if snapshot and self.dialect == "postgresql":
                    conn = conn.execution_options(isolation_level="REPEATABLE READ")
                with conn.begin():
                    yield conn
        except DataError as e:
            raise invalid(e) from None

    def insert(self, table: Table) -> postgresql.Insert | sqlite.Insert:
        """An INSERT that can say what to do on a conflict (the dialects spell it alike)."""
        return postgresql.insert(table) if self.dialect == "postgresql" else sqlite.insert(table)

    def append(
        self, conn: Connection, touched: set[JobSetKey], events: Sequence[EventMessage]
    ) -> None:
        """Append events to their job sets' logs, numbering each set's events in order."""
        self.append_new(conn, touched, new_events(self.dialect, events))

    def append_new(
        self, conn: Connection, touched: set[JobSetKey], made: Sequence[NewEvents]
    ) -> None:
        """Append events whose rows were made before the transaction (`new_events`: one
        NewEvents per job set). However many job sets, their numbers are taken in a
        statement per NUMBERED_AT_ONCE sets and their rows written in one: a cycle or a sync
        appending to a thousand sets made two statements for each."""
        made = sorted(made, key=attrgetter("key"))  # one lock order: no deadlocks
        if not made:
            return
        now = self.clock()
        touched.update(new.key for new in made)
        if self.dialect == "postgresql" and sum(len(n.rows.values) for n in made) <= FEW_ROWS:
            self._append_few(conn, made, now)
            return
        firsts: list[int] = []
        for chunk in chunks(made, NUMBERED_AT_ONCE):
            firsts += self._take_numbers(conn, [(new.key, len(new.rows)) for new in chunk], now)
        insert_numbered(conn, [(new.rows, first) for new, first in zip(made, firsts, strict=True)])

    def _append_few(self, conn: Connection, made: Sequence[NewEvents], now: datetime) -> None:
        """A few events (`FEW_ROWS`) numbered and written by one statement on PostgreSQL, the
        numbering's as a CTE: a request of one job appends two, a small sync a few, and the
        numbers' own statement was a round trip of each."""
        rows = [
            (len(new.rows.values) - place, *row)  # numbered back from the set's last
            for new in made
            for place, row in enumerate(new.rows.values, start=1)
        ]
        sql = _NUMBERED_FEW.get((len(made), len(rows)))
        if sql is None:
            value = "(%s::bigint, %s::text, %s::text, %s::text, %s::timestamptz, %s::bytea)"
            sql = _NUMBERED_FEW[(len(made), len(rows))] = (
                f"WITH n AS ({_numbering(self.dialect, len(made))}) "
                "INSERT INTO events (seq, queue, job_set, job_id, created_at, payload) "
                "SELECT n.last_seq - v.back, v.queue, v.job_set, v.job_id, v.created_at, "
                f"v.payload FROM (VALUES {', '.join([value] * len(rows))}) "
                "AS v(back, queue, job_set, job_id, created_at, payload) "
                "JOIN n ON n.queue = v.queue AND n.name = v.job_set"
            )
        numbering = [v for new in made for v in (*new.key, len(new.rows.values), now)]
        execute_sql(conn, sql, [*numbering, *(v for row in rows for v in row)])

    def _take_numbers(
        self, conn: Connection, counts: Sequence[tuple[JobSetKey, int]], now: datetime
    ) -> list[int]:
        """The first of each job set's `count` new message numbers, in order (the sets'
        rows locked until the transaction ends, so their events commit in the order of their
        numbers; `counts` in order of their keys, so transactions lock them in one order)."""
        args = [
            value for (queue, job_set), count in counts for value in (queue, job_set, count, now)
        ]
        rows = fetch_sql(conn, _numbering(self.dialect, len(counts)), args)
        last = {(row[0], row[1]): int(row[2]) for row in rows}
        return [last[key] - count + 1 for key, count in counts]

    def save_many(
        self,
        conn: Connection,
        touched: set[JobSetKey],
        changes: Sequence[Change],
        events: Sequence[EventMessage] | None = None,
        *,
        confirmed: Collection[str] = (),
    ) -> None:
        """How transitions of loaded jobs are written: the changed jobs (each only where its
        row still has the version it was read at, else Conflict), their latest runs, then the
        events (in `changes` order unless `events` gives them), as one executemany per
        table: a statement per row costs about a millisecond in SQLAlchemy, which a
        scheduling cycle or a sync of thousands of runs cannot afford.

        A run that ends here keeps its node's capacity for its grace period (see
        RELEASE_SLACK) unless it is in `confirmed`: its executor reported its end."""
        job_rows: list[dict[str, Any]] = []
        new_runs: list[dict[str, Any]] = []
        changed_runs: list[dict[str, Any]] = []
        changed_full: list[dict[str, Any]] = []
        all_events: list[EventMessage] = []
        for before, after, more in changes:
            job_rows.append(mutable_job_row(after))
            if after.runs and (not before.runs or after.runs[-1] != before.runs[-1]):
                row = run_row(after.id, after.runs[-1])
                old = next((r for r in before.runs if r.id == row["id"]), None)
                row["releases_at"] = _releases_at(after, old, confirmed)
                if old is not None and _fixed(old) == _fixed(after.runs[-1]):
                    # Only what a run's later events change: rewriting the columns of the
                    # (job_id, run_index) index cost SQLite an index update per row.
                    changed_runs.append({k: row[k] for k in _RUN_CHANGES} | {"_id": row["id"]})
                elif old is not None:
                    row["_id"] = row.pop("id")
                    changed_full.append(row)
                else:
                    new_runs.append(row)
            all_events.extend(more)
        written = executemany(conn, UPDATE_JOBS, job_rows)
        if written != len(job_rows):
            raise Conflict(
                f"{len(job_rows) - written} of {len(job_rows)} jobs changed since they were read"
            )
        executemany(conn, _INSERT_RUNS, new_runs)
        executemany(conn, UPDATE_RUNS, changed_runs)
        executemany(conn, UPDATE_RUNS, changed_full)
        events = all_events if events is None else events
        if events:
            self.append(conn, touched, events)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def from_timestamp(ts: Timestamp) -> datetime:
    """Timestamp.ToDatetime(tzinfo=UTC), without its per-call overhead (one per update)."""
    return _EPOCH + timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)


class NewEvents:
    """A job set's new events as rows of the events table, numbered when appended: made
    before the transaction that appends them (a submission makes its events' rows before
    it takes the write lock)."""

    __slots__ = ("key", "rows")

    def __init__(self, key: JobSetKey, rows: NewRows) -> None:
        self.key = key
        self.rows = rows


# The events table's columns as `new_events` fills them (the numbers come in `append_new`).
_EVENT_COLUMNS = ("queue", "job_set", "job_id", "created_at", "payload")


def new_events(dialect: str, events: Sequence[EventMessage]) -> list[NewEvents]:
    """The events by job set, in order within each, as the driver takes their rows. One pass
    over the events, each body found once: a cycle, a sync or a submission makes them by the
    tens of thousands, and the rows cost more to make than to write."""
    by_set: dict[JobSetKey, list[tuple[Any, ...]]] = {}
    times: dict[tuple[int, int], Any] = {}  # events share their times: converted once each
    sqlite = dialect == "sqlite"
    for e in events:
        kind = e.WhichOneof("events")
        if kind is None:
            raise ValueError("an event without a body")
        body = getattr(e, kind)
        queue, job_set, created = body.queue, body.job_set_id, body.created
        stamp = (created.seconds, created.nanos)
        when = times.get(stamp)
        if when is None:
            when = from_timestamp(created)
            times[stamp] = when = sqlite_value(when) if sqlite else when
        row = (queue, job_set, body.job_id, when, e.SerializeToString())
        rows = by_set.get((queue, job_set))
        if rows is None:
            by_set[(queue, job_set)] = [row]
        else:
            rows.append(row)
    return [new_event_rows(key, rows) for key, rows in by_set.items()]


def new_event_rows(key: JobSetKey, rows: list[tuple[Any, ...]]) -> NewEvents:
    """A job set's events from their rows made by the caller: (queue, job set, job id,
    created_at as the dialect stores it, the serialised event), in order."""
    return NewEvents(key, NewRows.of_values(t.events, _EVENT_COLUMNS, rows, numbered="seq"))


# The statements save_many runs (module constants: bulk.executemany caches their compiled
# forms). Jobs are written only where they still have the version they were read at.
UPDATE_JOBS = update(t.jobs).where(
    t.jobs.c.id == bindparam("_id"), t.jobs.c.version == bindparam("_version")
)
_INSERT_RUNS = insert(t.runs)
UPDATE_RUNS = update(t.runs).where(t.runs.c.id == bindparam("_id"))
# The run columns set after its lease (see lifecycle's handlers); the rest never change.
_RUN_CHANGES = (
    "node",
    "state",
    "pending_at",
    "started_at",
    "finished_at",
    "kubernetes_id",
    "condition",
    "category",
    "subcategory",
    "reason",
    "containers",
    "releases_at",
)


def _releases_at(job: Job, old: Run | None, confirmed: Collection[str]) -> datetime | None:
    """Until when a run that ends in this change still holds its node: it was active, and
    the server, not its executor, ended it (the processes may still be terminating)."""
    run = job.runs[-1]
    if old is None or not old.state.active or run.state.active or run.id in confirmed:
        return None
    grace = grace_period_seconds(job.pod_spec)
    return (run.finished_at or job.last_transition_at) + timedelta(seconds=grace) + RELEASE_SLACK


def _fixed(run: Run) -> tuple[int, str, str, datetime | None]:
    """What a run's lease decided, which no later event of the run changes."""
    return run.index, run.cluster_id, run.pool, run.leased_at


def invalid(error: DataError) -> InvalidArgument:
    """A value the database refuses (NUL in text, too long, out of range) is the caller's
    mistake, not the server's: say so without the SQL. The services check what they can
    name a field for first; this is the net under them."""
    reason = str(getattr(error, "orig", error)).strip().splitlines()
    return InvalidArgument(
        f"a value in the request cannot be stored: "
        f"{reason[0] if reason else 'rejected by the database'}"
    )
