"""SQLite's log goes back into the database file on the checkpointer's thread, not in commits."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import text

from armada_server.app import EmbeddedServer
from armada_server.storage.database import make_engine
from armada_server.storage.wal_checkpoints import AUTOCHECKPOINT_PAGES, WalCheckpointer


def _until(condition: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_commits_leave_the_log_to_the_checkpointer(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as conn:
            assert conn.execute(text("PRAGMA wal_autocheckpoint")).scalar() == AUTOCHECKPOINT_PAGES
            conn.execute(text("CREATE TABLE blobs (n INTEGER PRIMARY KEY, b BLOB)"))
        # About 1,000 pages in ten commits: under the commits' bound, so no commit copies them.
        for _ in range(10):
            with engine.begin() as conn:
                conn.execute(
                    text("INSERT INTO blobs (b) VALUES (randomblob(4000))"),
                    [{} for _ in range(100)],
                )
        before = path.stat().st_size
        assert before < 100 * 4096  # the rows are still only in the log
        checkpointer = WalCheckpointer(path, interval=0.01)
        checkpointer.start()
        try:
            assert _until(lambda: path.stat().st_size > 1000 * 4000)
        finally:
            checkpointer.stop()
        assert not checkpointer._thread.is_alive()
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM blobs")).scalar() == 1000
    finally:
        engine.dispose()


def test_a_checkpoint_copies_every_page_no_reader_needs(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE t (n INTEGER)"))
            conn.execute(text("INSERT INTO t VALUES (1)"))
        own = sqlite3.connect(path)
        try:
            logged, copied = WalCheckpointer.checkpoint(own)
            assert logged > 0 and copied == logged
        finally:
            own.close()
    finally:
        engine.dispose()


def _checkpointers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "wal-checkpoints"]


def test_a_server_on_an_sqlite_file_checkpoints_while_it_runs(tmp_path: Path) -> None:
    before = len(_checkpointers())  # other tests' servers may still run
    with EmbeddedServer(database_url=f"sqlite:///{tmp_path / 'server.db'}"):
        assert len(_checkpointers()) == before + 1
    assert len(_checkpointers()) == before
