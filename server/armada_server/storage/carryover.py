"""What the scheduling leader carries from one cycle to the next, kept in one row for whoever
leads next (the form of what is kept: scheduling/carryover.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, select, update

from armada_server.storage import schema as t
from armada_server.storage.base import Transactions
from armada_server.storage.guard import retried


class SchedulerCarryover:
    """The scheduler's carried-over state, as text."""

    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions

    def read(self) -> str | None:
        """What the scheduling leader last carried over (None: nothing yet)."""
        with self._tx.read() as conn:
            state: str | None = conn.execute(
                select(t.scheduler_carryover.c.state).where(t.scheduler_carryover.c.id == 1)
            ).scalar_one_or_none()
        return state

    @retried
    def write(self, state: str, *, now: datetime | None = None) -> None:
        """Keep what the scheduling leader carries to its next cycle, for whoever leads it."""
        now = now or self._tx.clock()
        with self._tx.write() as (conn, _):
            done = conn.execute(
                update(t.scheduler_carryover)
                .where(t.scheduler_carryover.c.id == 1)
                .values(state=state, updated_at=now)
            )
            if not done.rowcount:
                conn.execute(
                    insert(t.scheduler_carryover).values(id=1, state=state, updated_at=now)
                )
