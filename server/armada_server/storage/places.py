"""Where queued jobs stand in their queue's line: GetJobDetails says it of a waiting job.

The line is the order the scheduler offers a queue's queued gangs in (armada_core/scheduling
SEMANTICS.md, "Order"; `queued_order`): class priority (highest first), then job priority
(as the scheduler reads it: truncated to an integer), submit time and id, a gang (a single
job is a gang of one) at its first member's place. A gang ahead counts once, as the scheduler
takes it as one item; every member of a gang has its gang's place. Only what the scheduler
sees counts: queued jobs of a known priority class not waiting out a retry delay; jobs of a
cordoned queue are in no line (the scheduler does not order them). Gangs that wait for
missing members count as well: they are in line, only not yet complete. A job that fits no
node, even an empty one (the scheduler's latest reason says so, `FITS_NO_NODE`), has no place:
it is not next whatever stands before it (the server accepts such jobs only when told to,
services/node_fit.py). It still counts in the places of the jobs behind it, as the scheduler
still takes it in its turn.

The count is read when asked, from the partial indexes
ix_jobs_queued_order and ix_jobs_queued_gangs (queued jobs only, migration 0006) alone, and
in one pass per queue whatever the number of jobs asked about: the jobs asked of one queue
cut its line into consecutive ranges, each counted once, so a call costs what the line holds
up to the deepest job asked, not that times the number of jobs. The length of each such
queue's line (counted by the same rules) is read with the places, in the same snapshot, by
one more count over the same indexes: a place is never past its line's end, and both say
the same moment. That count reads the whole line, whatever place is asked about.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnClause,
    ColumnElement,
    Connection,
    FromClause,
    Integer,
    Select,
    bindparam,
    case,
    exists,
    func,
    literal_column,
    not_,
    or_,
    select,
    tuple_,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from armada_core.jobs import JobState
from armada_core.scheduling import reasons
from armada_server.storage import schema as t
from armada_server.storage.base import Transactions
from armada_server.storage.rows import chunks, when

# The partial indexes' condition, written as a literal: SQLite uses a partial index only for
# a query whose WHERE names its condition as written, not through a bound parameter.
_QUEUED: ColumnClause[int] = literal_column(str(int(JobState.QUEUED)))


class _Truncated(FunctionElement[int]):
    """A priority as the scheduler reads it (`int(priority)`; priorities are >= 0)."""

    type = Integer()
    name = "truncated"
    inherit_cache = True


@compiles(_Truncated)
def _truncated_default(element: _Truncated, compiler: Any, **kw: Any) -> str:
    return f"trunc({compiler.process(element.clauses, **kw)})"


@compiles(_Truncated, "sqlite")
def _truncated_sqlite(element: _Truncated, compiler: Any, **kw: Any) -> str:
    return f"CAST({compiler.process(element.clauses, **kw)} AS INTEGER)"


#: The scheduler's reasons for a job that no node can hold even when empty, or that no node
#: admits (alone or as a gang's member): jobs left waiting with these have no place in line.
_NOWHERE = (reasons.TOO_LARGE, reasons.NO_MATCHING_NODE)
FITS_NO_NODE = frozenset((*_NOWHERE, *(reasons.gang_failed(r) for r in _NOWHERE)))

# (class priority negated, priority truncated, submitted at, id): the scheduler's order.
Key = tuple[int, int, Any, str]
# Where a range of one class's index entries ends: (priority, submitted at, id); None: the end.
Bound = tuple[float, Any, str] | None


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ... 11th, 12th, 13th, ... 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True)
class Lines:
    """Places in line read in one snapshot: each job's place (1 = next) and, for every queue
    one of them stands in, how many the line holds (a gang counted once, as in a place)."""

    places: dict[str, int]
    lengths: dict[str, int]


class Places:
    """Places in line of queued jobs."""

    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions

    def queue_places(self, job_ids: Sequence[str], class_priorities: Mapping[str, int]) -> Lines:
        """Each job's place (1 = next) in its queue's line, for those of `job_ids` in a line:
        queued, of a class in `class_priorities` (name -> priority, the server's classes), not
        waiting out a retry delay, in a queue that is not cordoned; and the length of those
        queues' lines. Blocking: reads the database, in one snapshot."""
        now = self._tx.clock()
        with self._tx.read(snapshot=True) as conn:
            if conn.dialect.name == "postgresql":
                # The gang check's estimate makes PostgreSQL compile each count (JIT), which
                # took several times the count itself (170 of 210 ms for 200,000 entries).
                conn.exec_driver_sql("SET LOCAL jit = off")
            return _places(conn, list(job_ids), dict(class_priorities), now)


def _ready(table: FromClause, now: datetime | BindParameter[Any]) -> ColumnElement[bool]:
    return or_(table.c.retry_after.is_(None), table.c.retry_after <= now)


def _places(conn: Connection, job_ids: list[str], classes: dict[str, int], now: datetime) -> Lines:
    if not job_ids or not classes:
        return Lines({}, {})
    j = t.jobs
    asked: list[tuple[str, str, str | None, Key]] = []
    for chunk in chunks(job_ids, 500):
        # By id alone: naming the partial indexes' condition here would have SQLite search
        # them instead of the primary key.
        rows: Iterable[tuple[str, str, str, float, Any, str | None, int, Any, str]] = conn.execute(
            select(
                j.c.id,
                j.c.queue,
                j.c.priority_class,
                j.c.priority,
                j.c.submitted_at,
                j.c.gang_id,
                j.c.state,
                j.c.retry_after,
                j.c.scheduling_reason,
            ).where(j.c.id.in_(chunk))
        )
        for job_id, queue, pc, priority, submitted, gang, state, retry_after, why in rows:
            ready = retry_after is None or when(retry_after) <= now
            fits = why not in FITS_NO_NODE
            if state == JobState.QUEUED and ready and fits and pc in classes:
                asked.append(
                    (job_id, queue, gang, (-classes[pc], int(priority), submitted, job_id))
                )
    queues = sorted({queue for _, queue, _, _ in asked})
    cordoned: set[str] = (
        set(
            conn.execute(
                select(t.queues.c.name).where(t.queues.c.name.in_(queues), t.queues.c.cordoned)
            ).scalars()
        )
        if queues
        else set()
    )
    asked = [a for a in asked if a[1] not in cordoned]
    # A gang member stands where its gang's first member does.
    gangs = sorted({(queue, gang) for _, queue, gang, _ in asked if gang is not None})
    first: dict[tuple[str, str], Key] = {}
    for queue, names in _group(gangs).items():
        for chunk in chunks(names, 500):
            members: Iterable[tuple[str, str, float, Any, str]] = conn.execute(
                select(
                    j.c.gang_id, j.c.priority_class, j.c.priority, j.c.submitted_at, j.c.id
                ).where(
                    j.c.state == _QUEUED,
                    j.c.gang_id.is_not(None),
                    j.c.queue == queue,
                    j.c.gang_id.in_(chunk),
                    _ready(j, now),
                )
            )
            for gang, pc, priority, submitted, job_id in members:
                if pc in classes:
                    key = (-classes[pc], int(priority), submitted, job_id)
                    if (queue, gang) not in first or key < first[(queue, gang)]:
                        first[(queue, gang)] = key
    anchor = {
        job_id: first.get((queue, gang), key) if gang is not None else key
        for job_id, queue, gang, key in asked
    }
    queue_of = {job_id: queue for job_id, queue, _, _ in asked}
    anchors: dict[str, set[Key]] = defaultdict(set)
    for job_id, key in anchor.items():
        anchors[queue_of[job_id]].add(key)
    ahead: dict[tuple[str, Key], int] = {}
    lengths: dict[str, int] = {}
    for queue, keys in anchors.items():
        ahead.update({(queue, k): n for k, n in _ahead(conn, queue, keys, classes, now).items()})
        lengths[queue] = _length(conn, queue, classes, now)
    places = {job_id: ahead[(queue_of[job_id], key)] + 1 for job_id, key in anchor.items()}
    return Lines(places, lengths)


def _length(conn: Connection, queue: str, classes: dict[str, int], now: datetime) -> int:
    """How many gangs `queue`'s line holds: one count over every class's index entries."""
    statement = _statements(tuple(sorted(classes.items()))).length
    return int(
        conn.execute(statement, {"queue": queue, "names": sorted(classes), "now": now}).scalar_one()
    )


def _group(pairs: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for a, b in pairs:
        out[a].append(b)
    return out


def _ahead(
    conn: Connection, queue: str, keys: set[Key], classes: dict[str, int], now: datetime
) -> dict[Key, int]:
    """How many gangs of `queue`'s line stand before each key.

    Per class, the index entries of the queue (ordered by priority, submit time, id) are cut
    at every key of that class's priority into consecutive ranges, the last ending at the end
    when some key is of a lower class priority (the whole class is ahead of it); each range
    is counted once. A key's priority truncated, entries of a larger fractional priority with
    the same integer part stand before it too when submitted earlier: those (rarely any) are
    read once per integer part and counted here."""
    levels = {k[0] for k in keys}
    bounds: dict[str, set[Bound]] = defaultdict(set)
    for name, priority in classes.items():
        for level in levels:
            if -priority < level:
                bounds[name].add(None)
        for k in keys:
            if -priority == k[0]:
                bounds[name].add((k[1], k[2], k[3]))
    statements = _statements(tuple(sorted(classes.items())))
    before: dict[tuple[str, Bound], int] = {}  # entries of a class before where a range ends
    total: dict[str, int] = defaultdict(int)
    for name, ends in sorted(bounds.items()):
        present = [e for e in ends if e is not None]
        ordered: list[Bound] = [*sorted(present, key=lambda e: (e[0], e[1], e[2]))]
        if None in ends:
            ordered.append(None)
        low: Bound = None
        for end in ordered:
            for statement, params in statements.range(low, end):
                total[name] += conn.execute(
                    statement, {**params, "queue": queue, "name": name, "now": now}
                ).scalar_one()
            before[(name, end)] = total[name]
            low = end
    band: dict[tuple[int, int], list[tuple[Any, str]]] = {}
    for level, n in sorted({(k[0], k[1]) for k in keys}):
        names = [name for name, priority in classes.items() if -priority == level]
        entries: Iterable[tuple[Any, str]] = conn.execute(
            statements.band, {"queue": queue, "names": names, "now": now, "n": n, "n1": n + 1}
        )
        band[(level, n)] = [(submitted, job_id) for submitted, job_id in entries]
    out: dict[Key, int] = {}
    for k in keys:
        count = sum(1 for row in band[(k[0], k[1])] if row < (k[2], k[3]))
        for name, priority in classes.items():
            if -priority < k[0]:
                count += total[name]
            elif -priority == k[0]:
                count += before[(name, (k[1], k[2], k[3]))]
        out[k] = count
    return out


class _Statements:
    """The statements counting a queue's line, for one set of classes (name -> priority,
    written into them): built once, as building them costs more than running them."""

    def __init__(self, classes: tuple[tuple[str, int], ...]) -> None:
        r = t.jobs.alias("r")
        o = t.jobs.alias("o")
        c = t.jobs.c
        now = bindparam("now", type_=c.retry_after.type)

        def urgency(table: Any) -> ColumnElement[Any]:
            return -case(dict(classes), value=table.c.priority_class)

        # A gang stands at its first member: the others do not count.
        earlier_member = exists(
            select(literal_column("1")).where(
                o.c.state == _QUEUED,
                o.c.gang_id.is_not(None),
                o.c.queue == r.c.queue,
                o.c.gang_id == r.c.gang_id,
                _ready(o, now),
                tuple_(urgency(o), _Truncated(o.c.priority), o.c.submitted_at, o.c.id)
                < tuple_(urgency(r), _Truncated(r.c.priority), r.c.submitted_at, r.c.id),
            )
        )
        line = [
            r.c.state == _QUEUED,
            r.c.queue == bindparam("queue", type_=c.queue.type),
            _ready(r, now),
            or_(r.c.gang_id.is_(None), not_(earlier_member)),
        ]
        of_class = r.c.priority_class == bindparam("name", type_=c.priority_class.type)
        later = tuple_(r.c.submitted_at, r.c.id)
        ls, lid, es, eid = (
            bindparam(n, type_=col.type)
            for n, col in (
                ("ls", c.submitted_at),
                ("lid", c.id),
                ("es", c.submitted_at),
                ("eid", c.id),
            )
        )
        self._at: dict[tuple[bool, bool], Select[Any]] = {}
        self._between: dict[tuple[bool, bool], Select[Any]] = {}
        for has_low in (False, True):
            for has_end in (False, True):
                # One priority, from (ls, lid) to (es, eid). The plain bound on the submit
                # time ends PostgreSQL's scan there: it stops a scan at a row comparison's
                # first column only.
                at = [*line, of_class, r.c.priority == bindparam("p", type_=c.priority.type)]
                if has_low:
                    at.append(later >= tuple_(ls, lid))
                if has_end:
                    at += [later < tuple_(es, eid), r.c.submitted_at <= es]
                self._at[(has_low, has_end)] = select(func.count()).select_from(r).where(*at)
                between = [*line, of_class]
                if has_low:
                    between.append(r.c.priority > bindparam("lp", type_=c.priority.type))
                if has_end:
                    between.append(r.c.priority < bindparam("ep", type_=c.priority.type))
                self._between[(has_low, has_end)] = (
                    select(func.count()).select_from(r).where(*between)
                )
        # The whole line: each class's entries, in one search of the index per class.
        self.length = (
            select(func.count())
            .select_from(r)
            .where(*line, r.c.priority_class.in_(bindparam("names", expanding=True)))
        )
        # Entries whose priority has a fractional part, between two integers.
        self.band = select(r.c.submitted_at, r.c.id).where(
            *line,
            r.c.priority_class.in_(bindparam("names", expanding=True)),
            r.c.priority > bindparam("n", type_=c.priority.type),
            r.c.priority < bindparam("n1", type_=c.priority.type),
        )

    def range(self, low: Bound, end: Bound) -> list[tuple[Select[Any], dict[str, Any]]]:
        """The counts (statement, parameters) that together cover a class's entries from
        `low` (included; None: the start) to `end` (excluded; None: the end), in pieces
        whose every bound is one an index scan starts or stops at: the rest of low's
        priority, the priorities between, the start of end's priority."""
        if low is None and end is None:
            return [(self._between[(False, False)], {})]
        if low is not None and end is not None and low[0] == end[0]:
            return [
                (
                    self._at[(True, True)],
                    {"p": low[0], "ls": low[1], "lid": low[2], "es": end[1], "eid": end[2]},
                )
            ]
        out = []
        if low is not None:
            out.append((self._at[(True, False)], {"p": low[0], "ls": low[1], "lid": low[2]}))
        between = {"lp": low[0]} if low is not None else {}
        if end is not None:
            between["ep"] = end[0]
        out.append((self._between[(low is not None, end is not None)], between))
        if end is not None:
            out.append((self._at[(False, True)], {"p": end[0], "es": end[1], "eid": end[2]}))
        return out


@functools.lru_cache(maxsize=8)
def _statements(classes: tuple[tuple[str, int], ...]) -> _Statements:
    return _Statements(classes)
