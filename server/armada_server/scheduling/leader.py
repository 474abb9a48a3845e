"""Which replica schedules: exactly one per database.

On PostgreSQL the leader holds a session advisory lock on its own connection; if the
process dies its connection closes, the lock is released and another replica takes it on its
next attempt. SQLite is one process's database: that process leads.

A cycle asks on a worker thread while the server, stopping, gives leadership up on its own:
one lock keeps the two off the lock's connection at once, and a replica that gave leadership
up for good (`close`) never takes it again, not even in a cycle that was already on its way.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from sqlalchemy import Connection, Engine, text

log = logging.getLogger("armada_server")

LOCK_KEY = 0x41524D414441  # "ARMADA"


class Leadership:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._closed = False

    def is_leader(self) -> bool:
        """True while this replica holds leadership; tries to take it when free."""
        if self.engine.dialect.name != "postgresql":
            return not self._closed
        with self._lock:
            return not self._closed and self._hold()

    def _hold(self) -> bool:
        try:
            if self._conn is None:
                conn = self.engine.connect()
                got = conn.execute(
                    text("SELECT pg_try_advisory_lock(:k)"), {"k": LOCK_KEY}
                ).scalar()
                conn.commit()
                if not got:
                    conn.close()
                    return False
                log.info("this replica is now the scheduling leader")
                self._conn = conn
            else:
                self._conn.execute(text("SELECT 1"))
                self._conn.commit()
            return True
        except Exception as e:  # a broken connection means the lock is gone
            log.warning("lost scheduling leadership: %s", e)
            self._drop()
            return False

    def release(self) -> None:
        """Give leadership up now; the next `is_leader` may take it again."""
        with self._lock:
            self._drop()

    def close(self) -> None:
        """Give leadership up for good: the replica is stopping."""
        with self._lock:
            self._closed = True
            self._drop()

    def _drop(self) -> None:
        """Unlock, so the other replica can take it as soon as this returns (a closed
        connection's session ends, and frees the lock, only when its backend notices); then
        discard the connection, not return it to the pool, where its session would keep the
        lock had the unlock failed."""
        if self._conn is not None:
            with contextlib.suppress(Exception):  # already broken: its session is ending
                self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": LOCK_KEY})
                self._conn.commit()
            with contextlib.suppress(Exception):
                self._conn.invalidate()
                self._conn.close()
            self._conn = None
