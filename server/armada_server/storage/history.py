"""What the server still keeps of the jobs submitted since a time, for replaying them in the
what-if simulator (`armada-server simulate --from`): read-only."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, select

from armada_core.jobs import Job
from armada_server.storage import schema as t
from armada_server.storage.base import Transactions
from armada_server.storage.rows import chunks, load_jobs

# Queues per statement: their names go in an IN list.
QUEUE_CHUNK = 500


@dataclass(frozen=True)
class Kept:
    """The jobs of some queues submitted since a time, and since when the server keeps any
    job at all (None: it keeps none): a window that starts earlier was cut by retention."""

    jobs: list[Job]
    kept_since: datetime | None


class JobHistory:
    def __init__(self, transactions: Transactions) -> None:
        self._tx = transactions

    def submitted_since(self, since: datetime, queues: Collection[str]) -> Kept:
        """The jobs of `queues` submitted at or after `since`, with their runs, by id."""
        with self._tx.read(snapshot=True) as conn:
            oldest = conn.execute(select(func.min(t.jobs.c.submitted_at))).scalar()
            if isinstance(oldest, str):  # SQLite gives an aggregate's text as it is stored
                oldest = datetime.fromisoformat(oldest)
            jobs: list[Job] = []
            for part in chunks(sorted(queues), QUEUE_CHUNK):
                jobs += load_jobs(
                    conn, and_(t.jobs.c.submitted_at >= since, t.jobs.c.queue.in_(part))
                )
        jobs.sort(key=lambda j: (j.submitted_at, j.id))
        return Kept(jobs, oldest)
