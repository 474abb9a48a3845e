"""Reading the event log: each job set's events in order, from any message number.

Events are appended by the transactions that record what happened (`Transactions.append`);
this part only reads them, for the event streams and the web UI. The event hub reads the new
events of every watched job set in one statement (`events_after_many`), however many sets
and watchers there are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, select

from armada_server.storage import schema as t
from armada_server.storage.base import JobSetKey, Transactions

# Job sets per statement of the reads over many sets: three parameters each, well inside
# SQLite's 32,766 and PostgreSQL's 65,535.
SETS_PER_STATEMENT = 1000


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    payload: bytes


@dataclass(frozen=True)
class SetEvents:
    """What one read over many job sets found for one of them, and whether it may hold more."""

    events: list[StoredEvent]
    more: bool


class EventLog:
    """Each job set's append-only log of events."""

    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions

    def events_after(
        self, queue: str, job_set: str, after: int, limit: int = 1000
    ) -> list[StoredEvent]:
        with self._tx.read() as conn:
            rows = conn.execute(
                select(t.events.c.seq, t.events.c.payload)
                .where(
                    t.events.c.queue == queue, t.events.c.job_set == job_set, t.events.c.seq > after
                )
                .order_by(t.events.c.seq)
                .limit(limit)
            ).all()
        return [StoredEvent(r.seq, r.payload) for r in rows]

    def events_after_many(
        self, cursors: Sequence[tuple[JobSetKey, int]], limit: int = 10_000
    ) -> dict[JobSetKey, SetEvents]:
        """Each job set's events after its cursor, in one read transaction (one statement per
        SETS_PER_STATEMENT sets), at most `limit` events per statement. Each set gets the first
        of its new events in order; `more` says the limit may have cut it short."""
        found: dict[JobSetKey, SetEvents] = {}
        with self._tx.read() as conn:
            for start in range(0, len(cursors), SETS_PER_STATEMENT):
                chunk = cursors[start : start + SETS_PER_STATEMENT]
                found.update(self._read_chunk(conn, chunk, limit))
        return found

    def _read_chunk(
        self, conn: Connection, cursors: Sequence[tuple[JobSetKey, int]], limit: int
    ) -> dict[JobSetKey, SetEvents]:
        mark = "?" if self._tx.dialect == "sqlite" else "%s"
        rows_sql = ", ".join(f"({mark}, {mark}, CAST({mark} AS BIGINT))" for _ in cursors)
        params: list[str | int] = []
        for (queue, job_set), after in cursors:
            params += [queue, job_set, after]
        params.append(limit)
        # Ordered by set then number, a LIMIT cuts at most one set short and leaves the sets
        # after it empty: every set still gets a prefix of its new events.
        rows = conn.exec_driver_sql(
            f"WITH c(queue, job_set, seen) AS (VALUES {rows_sql}) "
            "SELECT e.queue, e.job_set, e.seq, e.payload FROM c JOIN events e "
            "ON e.queue = c.queue AND e.job_set = c.job_set AND e.seq > c.seen "
            f"ORDER BY e.queue, e.job_set, e.seq LIMIT {mark}",
            tuple(params),
        ).all()
        cut = len(rows) >= limit
        by_set: dict[JobSetKey, list[StoredEvent]] = {key: [] for key, _ in cursors}
        for row in rows:
            by_set[(row.queue, row.job_set)].append(StoredEvent(row.seq, bytes(row.payload)))
        return {key: SetEvents(events, cut) for key, events in by_set.items()}

    def last_seq(self, queue: str, job_set: str) -> int | None:
        """The newest message number of a job set, or None when it has no events."""
        with self._tx.read() as conn:
            last: int | None = conn.execute(
                select(t.job_sets.c.last_seq).where(
                    t.job_sets.c.queue == queue, t.job_sets.c.name == job_set
                )
            ).scalar_one_or_none()
        return last

    def last_seqs(self, keys: Iterable[JobSetKey]) -> dict[JobSetKey, int]:
        """The newest message number of each job set (0 for a set without events yet)."""
        wanted = list(keys)
        found = dict.fromkeys(wanted, 0)
        with self._tx.read() as conn:
            for start in range(0, len(wanted), SETS_PER_STATEMENT):
                chunk = wanted[start : start + SETS_PER_STATEMENT]
                for queue in {q for q, _ in chunk}:
                    names = [s for q, s in chunk if q == queue]
                    rows = conn.execute(
                        select(t.job_sets.c.name, t.job_sets.c.last_seq).where(
                            t.job_sets.c.queue == queue, t.job_sets.c.name.in_(names)
                        )
                    ).all()
                    for row in rows:
                        found[(queue, row.name)] = row.last_seq
        return found
