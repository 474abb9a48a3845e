"""Cross-replica wake-ups: PostgreSQL LISTEN/NOTIFY on the job sets that got events.

Every transaction that appends events also NOTIFYs, in the statement that numbers them
(delivered at commit, never for a rolled back transaction); each server replica LISTENs on
one connection and wakes its own watchers as each notification arrives. Notifications sent
while the connection was down are lost, so on every (re)connection it wakes the watchers of
every job set (`wake(None)`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import Engine

log = logging.getLogger("armada_server")

CHANNEL = "armada_events"
_SEP = "\x1f"  # cannot occur in queue names


# The notification of a job set whose numbers a statement on `job_sets` takes, as a column of
# its RETURNING: the statement that numbers a transaction's events (`Transactions.append_new`)
# also notifies their sets, a round trip fewer for every write that appends events.
NOTIFY_RETURNED = f"pg_notify('{CHANNEL}', queue || chr({ord(_SEP)}) || name)"


class Listener:
    """A thread LISTENing for other replicas' events; reconnects when the connection drops."""

    def __init__(self, engine: Engine, wake: Callable[[set[tuple[str, str]] | None], None]) -> None:
        self._dsn = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._wake = wake
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="armada-listen", daemon=True)
        self.ready = threading.Event()

    def start(self) -> None:
        self._thread.start()
        self.ready.wait(30)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._wake(None)
                    self.ready.set()
                    while not self._stop.is_set():
                        # Each notification as it arrives: the generator itself only ends
                        # after `timeout` without one, which is when the stop flag is checked.
                        for note in conn.notifies(timeout=0.5):
                            queue, _, job_set = note.payload.partition(_SEP)
                            self._wake({(queue, job_set)})
            except psycopg.Error as e:
                log.warning("event listener lost its database connection (%s); retrying", e)
                self._stop.wait(1.0)
