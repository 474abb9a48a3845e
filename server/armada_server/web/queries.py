"""Read-only queries the UI and the gateway page through, never loading every job.

Job lists use keyset pagination: rows come in the order of an indexed column with the job id
(a ULID: ids sort by submission time) as tie-breaker, and a page's cursor is its last row's
(value, id), so page 10,000 costs what page 1 does. Queue, job set and state filters use the
jobs table's indexes; the annotation filter (annotations live in the stored spec) scans
within the other filters' result, at most SCAN_LIMIT rows per page. A filter's `queues` (the
queues the caller may watch) is one more condition of the same query, so pages, cursors and
counts cover only those queues' jobs.
"""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Row,
    UnaryExpression,
    and_,
    case,
    func,
    or_,
    select,
    true,
)

from armada_core.api import event_pb2, submit_pb2
from armada_core.jobs import JobState
from armada_core.jobs.annotations import GANG_ROLE
from armada_server.errors import InvalidArgument
from armada_server.storage import schema as t
from armada_server.storage.base import ACTIVE_RUN_STATES
from armada_server.storage.job_reads import JobReads
from armada_server.storage.rows import when

MAX_PAGE = 500
SCAN_BATCH = 500
SCAN_LIMIT = 10_000
MAX_EVENTS = 2_000
MAX_GANG = 1_000

# Sort keys: the column ordered on (the job id always breaks ties).
SORTS = {
    "submitted": None,  # the id itself: ULIDs sort by submission time
    "updated": t.jobs.c.last_transition_at,
    "priority": t.jobs.c.priority,
    "state": t.jobs.c.state,
}

STATE_NAMES = {s.name.lower(): s for s in JobState if s is not JobState.UNKNOWN}


@dataclass(frozen=True)
class JobRow:
    id: str
    queue: str
    job_set: str
    state: JobState
    priority: float
    priority_class: str
    gang_id: str | None
    submitted_at: datetime
    last_transition_at: datetime
    reason: str  # why it is not scheduled yet, or why it failed / was cancelled
    annotations: dict[str, str] | None = None
    client_id: str = ""

    @property
    def role(self) -> str:
        """The job's role in its pod group ("" for none)."""
        return (self.annotations or {}).get(GANG_ROLE, "")


@dataclass(frozen=True)
class JobPage:
    rows: list[JobRow]
    next: str | None  # cursor of the next page (None: this is the last)
    prev: str | None  # cursor of the previous page (None: this is the first)
    scanned_out: bool = False  # the annotation filter stopped at SCAN_LIMIT rows


@dataclass(frozen=True)
class JobFilter:
    queue: str = ""
    job_set: str = ""
    states: tuple[JobState, ...] = ()
    annotation: str = ""  # "key" or "key=value"
    sort: str = "submitted"
    descending: bool = True
    # Only these queues' jobs (the queues the caller may watch); None: every queue.
    queues: frozenset[str] | None = None

    def check(self) -> JobFilter:
        if self.sort not in SORTS:
            raise InvalidArgument(f"sort: {self.sort!r} is not one of {', '.join(SORTS)}")
        for name, value in (
            ("queue", self.queue),
            ("jobSet", self.job_set),
            ("annotation", self.annotation),
        ):
            if "\x00" in value:
                raise InvalidArgument(f"{name}: must not contain NUL characters")
        if self.job_set and not self.queue:
            raise InvalidArgument("jobSet: filtering on a job set needs its queue too")
        return self


def parse_states(values: Sequence[str]) -> tuple[JobState, ...]:
    out = []
    for value in values:
        for part in value.split(","):
            part = part.strip().lower()
            if not part:
                continue
            if part not in STATE_NAMES:
                raise InvalidArgument(
                    f"state: {part!r} is not a job state ({', '.join(STATE_NAMES)})"
                )
            out.append(STATE_NAMES[part])
    return tuple(dict.fromkeys(out))


def _encode_cursor(direction: str, value: Any, job_id: str) -> str:
    if isinstance(value, datetime):
        value = {"t": when(value).isoformat()}
    raw = json.dumps([direction, value, job_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str, sort: str) -> tuple[str, Any, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        direction, value, job_id = json.loads(raw)
        if direction not in ("after", "before") or not isinstance(job_id, str):
            raise ValueError(direction)
        if isinstance(value, dict):
            value = datetime.fromisoformat(value["t"])
        column = SORTS[sort]
        is_time = column is t.jobs.c.last_transition_at
        if column is None:
            value = None
        elif (is_time and not isinstance(value, datetime)) or (
            not is_time and (isinstance(value, bool) or not isinstance(value, int | float))
        ):
            raise ValueError(value)
        if "\x00" in job_id:
            raise ValueError(job_id)
    except (ValueError, TypeError, KeyError, json.JSONDecodeError):
        raise InvalidArgument(
            "cursor: not a cursor of this list (start again from the first page)"
        ) from None
    return direction, value, job_id


def _annotation_match(spec: bytes, annotation: str) -> tuple[bool, dict[str, str]]:
    annotations = dict(submit_pb2.Job.FromString(spec).annotations)
    key, has_value, value = annotation.partition("=")
    if key not in annotations:
        return False, annotations
    return (not has_value or annotations[key] == value), annotations


# What a job list row reads (the spec too when an annotation filter needs it).
_ROW_COLUMNS = (
    t.jobs.c.id,
    t.jobs.c.queue,
    t.jobs.c.job_set,
    t.jobs.c.state,
    t.jobs.c.priority,
    t.jobs.c.priority_class,
    t.jobs.c.gang_id,
    t.jobs.c.submitted_at,
    t.jobs.c.last_transition_at,
    t.jobs.c.scheduling_reason,
    t.jobs.c.failure_reason,
    t.jobs.c.cancel_reason,
    t.jobs.c.client_id,
)


def list_jobs(
    store: JobReads, where: JobFilter, *, limit: int = 50, cursor: str | None = None
) -> JobPage:
    """One page of jobs. Blocking."""
    where = where.check()
    limit = max(1, min(limit, MAX_PAGE))
    column = SORTS[where.sort]
    cond = _filters(where)
    direction, ascending = "after", not where.descending
    if cursor:
        direction, value, job_id = _decode_cursor(cursor, where.sort)
        # "after" follows the list's order; "before" goes back against it.
        ascending = (direction == "after") != where.descending
        cond.append(_beyond(column, value, job_id, ascending))
    resume: Row[Any] | None = None
    with store.engine.connect() as conn:
        if not where.annotation:
            found = conn.execute(
                select(*_ROW_COLUMNS)
                .where(and_(true(), *cond))
                .order_by(*_order(column, ascending))
                .limit(limit + 1)
            ).all()
            rows = [_row(r) for r in found]
        else:
            rows, resume = _scan_annotated(conn, where.annotation, cond, column, ascending, limit)
    more = len(rows) > limit
    rows = rows[:limit]
    # The annotation filter stopped scanning: the next page goes on from the last row looked at.
    scanned_out = not more and resume is not None
    more = more or scanned_out
    if direction == "before":
        rows.reverse()
    if not where.annotation:
        rows = _with_annotations(store, rows)
    if not rows and not scanned_out:
        return JobPage([], None, None)
    if direction == "after":
        has_next, has_prev = more, bool(cursor)
    else:
        has_next, has_prev = True, more
    if scanned_out and direction == "after" and resume is not None:
        next_cursor: str | None = _encode_cursor("after", _sort_value(column, resume), resume.id)
    else:
        next_cursor = _cursor_at("after", column, rows[-1]) if (has_next and rows) else None
    prev_cursor = _cursor_at("before", column, rows[0]) if (has_prev and rows) else None
    return JobPage(rows, next_cursor, prev_cursor, scanned_out)


def _with_annotations(store: JobReads, rows: list[JobRow]) -> list[JobRow]:
    """The page's rows with their annotations, read from their specs by id (one page's
    worth, never the whole filter's)."""
    if not rows:
        return rows
    with store.engine.connect() as conn:
        found = conn.execute(
            select(t.jobs.c.id, t.jobs.c.spec).where(t.jobs.c.id.in_([r.id for r in rows]))
        ).all()
    specs: dict[str, bytes] = {f.id: f.spec for f in found}
    return [
        replace(r, annotations=dict(submit_pb2.Job.FromString(specs[r.id]).annotations))
        if r.id in specs
        else r
        for r in rows
    ]


def _filters(where: JobFilter) -> list[ColumnElement[bool]]:
    """The conditions of the queue, job set and state filters (the jobs table's indexes), and
    of the queues the caller may watch."""
    cond: list[ColumnElement[bool]] = []
    if where.queues is not None:
        cond.append(t.jobs.c.queue.in_(sorted(where.queues)))
    if where.queue:
        cond.append(t.jobs.c.queue == where.queue)
    if where.job_set:
        cond.append(t.jobs.c.job_set == where.job_set)
    if where.states:
        cond.append(t.jobs.c.state.in_([int(s) for s in where.states]))
    return cond


def _scan_annotated(
    conn: Connection,
    annotation: str,
    cond: list[ColumnElement[bool]],
    column: Column[Any] | None,
    ascending: bool,
    limit: int,
) -> tuple[list[JobRow], Row[Any] | None]:
    """Up to limit + 1 rows whose annotations match, scanning at most SCAN_LIMIT rows in
    batches; and the last row looked at when the scan stopped at SCAN_LIMIT (else None)."""
    rows: list[JobRow] = []
    scanned = 0
    last: Row[Any] | None = None
    while len(rows) < limit + 1 and scanned < SCAN_LIMIT:
        extra: list[ColumnElement[bool]] = []
        if last is not None:
            extra = [_beyond(column, _sort_value(column, last), last.id, ascending)]
        batch = conn.execute(
            select(*_ROW_COLUMNS, t.jobs.c.spec)
            .where(and_(true(), *cond, *extra))
            .order_by(*_order(column, ascending))
            .limit(SCAN_BATCH)
        ).all()
        for r in batch:
            scanned += 1
            last = r
            ok, annotations = _annotation_match(r.spec, annotation)
            if ok:
                rows.append(_row(r, annotations))
                if len(rows) == limit + 1:
                    break
        if len(batch) < SCAN_BATCH:
            break
    return rows, (last if scanned >= SCAN_LIMIT else None)


def _order(column: Column[Any] | None, ascending: bool) -> list[UnaryExpression[Any]]:
    """The list's order: the sort column, then the job id."""
    by = [] if column is None else [column.asc() if ascending else column.desc()]
    return [*by, t.jobs.c.id.asc() if ascending else t.jobs.c.id.desc()]


def _beyond(
    column: Column[Any] | None, value: Any, job_id: str, ascending: bool
) -> ColumnElement[bool]:
    """Rows past (value, job_id) in the list's order: ascending or descending."""
    if column is None:
        return t.jobs.c.id > job_id if ascending else t.jobs.c.id < job_id
    if ascending:
        return or_(column > value, and_(column == value, t.jobs.c.id > job_id))
    return or_(column < value, and_(column == value, t.jobs.c.id < job_id))


def _sort_value(column: Column[Any] | None, row: Any) -> Any:
    return None if column is None else getattr(row, column.name)


def _cursor_at(direction: str, column: Column[Any] | None, row: JobRow) -> str:
    return _encode_cursor(direction, _sort_value(column, row), row.id)


def _row(r: Any, annotations: dict[str, str] | None = None) -> JobRow:
    state = JobState(r.state)
    if state in (JobState.FAILED, JobState.REJECTED):
        reason = r.failure_reason
    elif state is JobState.CANCELLED:
        reason = r.cancel_reason
    else:
        reason = r.scheduling_reason
    return JobRow(
        r.id,
        r.queue,
        r.job_set,
        state,
        r.priority,
        r.priority_class,
        r.gang_id,
        when(r.submitted_at),
        when(r.last_transition_at),
        reason or "",
        annotations,
        r.client_id or "",
    )


@dataclass(frozen=True)
class JobSetRow:
    queue: str
    name: str
    created_at: datetime
    last_seq: int
    counts: dict[JobState, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def list_job_sets(
    store: JobReads, queue: str, *, limit: int = 50, offset: int = 0
) -> tuple[list[JobSetRow], bool]:
    """A queue's job sets, newest first, with their jobs counted by state. Blocking."""
    limit = max(1, min(limit, MAX_PAGE))
    with store.engine.connect() as conn:
        sets = conn.execute(
            select(t.job_sets)
            .where(t.job_sets.c.queue == queue)
            .order_by(t.job_sets.c.created_at.desc(), t.job_sets.c.name)
            .offset(max(0, offset))
            .limit(limit + 1)
        ).all()
        more = len(sets) > limit
        sets = sets[:limit]
        counts: dict[str, dict[JobState, int]] = defaultdict(dict)
        names = [s.name for s in sets]
        for i in range(0, len(names), 200):
            found: Sequence[tuple[str, int, int]] = conn.execute(
                select(t.jobs.c.job_set, t.jobs.c.state, func.count())
                .where(t.jobs.c.queue == queue, t.jobs.c.job_set.in_(names[i : i + 200]))
                .group_by(t.jobs.c.job_set, t.jobs.c.state)
            ).all()
            for job_set, state, n in found:
                counts[job_set][JobState(state)] = n
    return [
        JobSetRow(s.queue, s.name, when(s.created_at), s.last_seq, counts[s.name]) for s in sets
    ], more


def job_set_counts(store: JobReads, queue: str, job_set: str) -> dict[JobState, int]:
    with store.engine.connect() as conn:
        found: Sequence[tuple[int, int]] = conn.execute(
            select(t.jobs.c.state, func.count())
            .where(t.jobs.c.queue == queue, t.jobs.c.job_set == job_set)
            .group_by(t.jobs.c.state)
        ).all()
        return {JobState(s): n for s, n in found}


def job_events(
    store: JobReads, queue: str, job_set: str, job_id: str
) -> list[tuple[int, event_pb2.EventMessage]]:
    """A job's events from its job set's log, in order (at most MAX_EVENTS). Blocking."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(t.events.c.seq, t.events.c.payload)
            .where(
                t.events.c.queue == queue,
                t.events.c.job_set == job_set,
                t.events.c.job_id == job_id,
            )
            .order_by(t.events.c.seq)
            .limit(MAX_EVENTS)
        ).all()
    return [(r.seq, event_pb2.EventMessage.FromString(r.payload)) for r in rows]


def gang_members(store: JobReads, queue: str, job_set: str, gang_id: str) -> list[JobRow]:
    """The jobs of a gang (submitted in one job set). Blocking."""
    with store.engine.connect() as conn:
        found = conn.execute(
            select(*_ROW_COLUMNS)
            .where(
                t.jobs.c.queue == queue, t.jobs.c.job_set == job_set, t.jobs.c.gang_id == gang_id
            )
            .order_by(t.jobs.c.id)
            .limit(MAX_GANG)
        ).all()
    return [_row(r) for r in found]


def queue_counts(store: JobReads) -> dict[str, dict[JobState, int]]:
    """Jobs per queue and state (what the metrics read). Blocking."""
    out: dict[str, dict[JobState, int]] = defaultdict(dict)
    for (queue, state), n in store.count_jobs_by_queue_and_state().items():
        out[queue][state] = n
    return out


# What the job list groups by: the query string's name, and the label the page shows.
GROUPS = {
    "queue": "queue",
    "jobSet": "job set",
    "state": "state",
    "reason": "reason",
    "node": "node",
    "priorityClass": "priority class",
}
MAX_GROUPS = 500


@dataclass(frozen=True)
class Group:
    value: str  # the state's name for state; "" for no reason or no node
    count: int
    queue: str = ""  # a job set's queue (job sets are named within their queue)


def _reason_column() -> ColumnElement[Any]:
    """The reason a list row shows (see _row), as SQL so that GROUP BY can count it."""
    failed = [int(JobState.FAILED), int(JobState.REJECTED)]
    return case(
        (t.jobs.c.state.in_(failed), t.jobs.c.failure_reason),
        (t.jobs.c.state == int(JobState.CANCELLED), t.jobs.c.cancel_reason),
        else_=t.jobs.c.scheduling_reason,
    )


def group_counts(store: JobReads, where: JobFilter, by: str) -> tuple[list[Group], bool]:
    """The jobs matching the filter counted per value of `by`, largest groups first (at most
    MAX_GROUPS; the flag says there were more), counted by the database's GROUP BY.
    A job's node is that of its latest run (none: never placed). Blocking."""
    where = where.check()
    if by not in GROUPS:
        raise InvalidArgument(f"groupBy: {by!r} is not one of {', '.join(GROUPS)}")
    if where.annotation:
        raise InvalidArgument(
            "groupBy: annotations live in the job's spec and cannot be counted by the database; "
            "group without the annotation filter"
        )
    keys: list[ColumnElement[Any]]
    source: Any = t.jobs
    if by == "jobSet":
        keys = [t.jobs.c.job_set, t.jobs.c.queue]
    elif by == "reason":
        keys = [_reason_column()]
    elif by == "node":
        other = t.runs.alias("other_runs")
        latest = (
            select(func.max(other.c.run_index))
            .where(other.c.job_id == t.jobs.c.id)
            .scalar_subquery()
        )
        source = t.jobs.outerjoin(
            t.runs, and_(t.runs.c.job_id == t.jobs.c.id, t.runs.c.run_index == latest)
        )
        keys = [func.coalesce(t.runs.c.node, "")]
    else:
        column = {"queue": t.jobs.c.queue, "state": t.jobs.c.state}.get(by)
        keys = [t.jobs.c.priority_class if column is None else column]
    count = func.count().label("n")
    with store.engine.connect() as conn:
        found = conn.execute(
            select(*keys, count)
            .select_from(source)
            .where(and_(true(), *_filters(where)))
            .group_by(*keys)
            .order_by(count.desc(), *keys)
            .limit(MAX_GROUPS + 1)
        ).all()
    groups = [
        Group(
            JobState(r[0]).name if by == "state" else (r[0] or ""),
            r[-1],
            r[1] if by == "jobSet" else "",
        )
        for r in found[:MAX_GROUPS]
    ]
    return groups, len(found) > MAX_GROUPS


@dataclass(frozen=True)
class NodeJob:
    id: str
    queue: str
    job_set: str
    state: JobState


_ON_NODE = (JobState.LEASED, JobState.PENDING, JobState.RUNNING)


def jobs_on_nodes(store: JobReads) -> dict[tuple[str, str], list[NodeJob]]:
    """(executor, node) -> the jobs running there (leased, pending or running), oldest first.
    Read from the jobs table's state index: as many rows as jobs running, however many
    have ended. Blocking."""
    states = [int(s) for s in _ON_NODE]
    out: dict[tuple[str, str], list[NodeJob]] = defaultdict(list)
    with store.engine.connect() as conn:
        found = conn.execute(
            select(
                t.runs.c.cluster_id,
                t.runs.c.node,
                t.jobs.c.id,
                t.jobs.c.queue,
                t.jobs.c.job_set,
                t.jobs.c.state,
            )
            .select_from(t.jobs.join(t.runs, t.runs.c.job_id == t.jobs.c.id))
            .where(t.jobs.c.state.in_(states), t.runs.c.state.in_(ACTIVE_RUN_STATES))
            .order_by(t.jobs.c.id)
        ).all()
    for r in found:
        out[(r.cluster_id, r.node)].append(NodeJob(r.id, r.queue, r.job_set, JobState(r.state)))
    return out


LIVE = (JobState.SUBMITTED, JobState.QUEUED, *_ON_NODE)


def live_condition(where: JobFilter, queues: Sequence[str]) -> ColumnElement[bool]:
    """The live jobs (not yet ended) of the filter in the given queues: what a bulk action
    of the list acts on."""
    live = [s for s in (where.states or LIVE) if s in LIVE]
    return and_(
        true(),
        *_filters(JobFilter(where.queue, where.job_set)),
        t.jobs.c.state.in_([int(s) for s in live]),
        t.jobs.c.queue.in_(list(queues)),
    )


def live_counts(store: JobReads, where: JobFilter) -> dict[str, int]:
    """Queue -> how many of its live jobs the filter matches (GROUP BY queue). Blocking."""
    live = [int(s) for s in (where.states or LIVE) if s in LIVE]
    with store.engine.connect() as conn:
        found: Sequence[tuple[str, int]] = conn.execute(
            select(t.jobs.c.queue, func.count())
            .where(
                and_(true(), *_filters(JobFilter(where.queue, where.job_set))),
                t.jobs.c.state.in_(live),
            )
            .group_by(t.jobs.c.queue)
        ).all()
    return {queue: n for queue, n in found}
