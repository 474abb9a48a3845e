"""Reading the event log: each job set's events in order, from any message number.

Events are appended by the transactions that record what happened (`Transactions.append`);
this part only reads them, for the event streams and the web UI.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from armada_server.storage import schema as t
from armada_server.storage.base import Transactions


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    payload: bytes


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

    def last_seq(self, queue: str, job_set: str) -> int | None:
        """The newest message number of a job set, or None when it has no events."""
        with self._tx.read() as conn:
            last: int | None = conn.execute(
                select(t.job_sets.c.last_seq).where(
                    t.job_sets.c.queue == queue, t.job_sets.c.name == job_set
                )
            ).scalar_one_or_none()
        return last
