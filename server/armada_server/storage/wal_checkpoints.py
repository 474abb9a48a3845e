"""SQLite's write-ahead log copied back into the database file on a thread of its own.

SQLite checkpoints (copies the log's pages into the file) in whichever commit takes the log
past its autocheckpoint size, 1,000 pages by default: a 1,000-job submission's commit did so
nearly every time, while the server's write lock (`Transactions.write`) was still held and
every other writer waited. The server runs a checkpointer instead: every `interval` it makes
a PASSIVE checkpoint, which takes no lock that writers or readers wait for, and SQLite lets
go of the interpreter's lock while it copies, so the copy runs beside the writers on another
core. Commits still checkpoint once the log passes AUTOCHECKPOINT_PAGES, the bound for a
process without a checkpointer (a prune command, a script over the storage) and for one that
falls behind.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

log = logging.getLogger(__name__)

# The log's size, in pages, at which a commit checkpoints (what `make_engine` sets on each
# connection): 16 MiB of 4 KiB pages, half a second of the largest submissions.
AUTOCHECKPOINT_PAGES = 4_096


class WalCheckpointer:
    """Checkpoints `path`'s log every `interval` seconds on a daemon thread, until `stop`."""

    def __init__(self, path: Path, interval: float = 0.2) -> None:
        self.path = path
        self.interval = interval
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wal-checkpoints", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        try:
            while not self._stopping.wait(self.interval):
                try:
                    self.checkpoint(conn)
                except sqlite3.Error:  # the next round tries again; commits bound the log
                    log.exception("checkpointing %s failed", self.path)
        finally:
            conn.close()

    @staticmethod
    def checkpoint(conn: sqlite3.Connection) -> tuple[int, int]:
        """One PASSIVE checkpoint: the pages in the log, and how many of them are in the
        file now (all of them unless a reader still needs older ones)."""
        _busy, logged, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()[0]
        return logged, copied
