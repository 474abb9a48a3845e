"""Opening the database: engine settings per backend, and migrations to the current schema."""

from __future__ import annotations

import os
import select
import sqlite3
import threading
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, RootTransaction, create_engine, event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import ConnectionPoolEntry, SingletonThreadPool

from armada_server.storage.wal_checkpoints import AUTOCHECKPOINT_PAGES

MIGRATIONS = Path(__file__).with_name("migrations")

# Set while `begin_write` begins a transaction, on its own thread (read by `_sqlite_begin`).
_writing = threading.local()


def default_data_dir() -> Path:
    """The server's directory in the user's data directory (XDG)."""
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "armada-server"


def default_database_url(data_dir: Path | None = None) -> str:
    """An SQLite file in the data directory (the user's by default), created on first use."""
    return f"sqlite:///{(data_dir or default_data_dir()) / 'armada.db'}"


def sqlite_file(url: str) -> Path | None:
    """The file of an SQLite URL; None for other databases and in-memory SQLite."""
    if not url.startswith("sqlite"):
        return None
    path = url.split("///", 1)[1].split("?", 1)[0] if "///" in url else ""
    return Path(path) if path and path != ":memory:" else None


def make_engine(url: str, *, durable: bool = True) -> Engine:
    """An engine for `url`; SQLite files get WAL mode and a busy timeout.

    A database that is not `durable` lives only as long as its process and is used by one
    thread (the what-if simulator's). SQLite then never waits for the disk, which was half
    of each commit's cost; keeps its rollback journal in memory instead of a write-ahead
    log, which wrote each changed page twice (to the log, then back into the file); and
    works through one connection that holds the file's lock throughout, so no transaction
    takes and releases file locks or looks for a journal left behind, and the page cache
    is not thrown away when another connection wrote. A simulated step made about 450 writes
    and 130 calls to lock and read the file; it makes about 180 writes."""
    if url.startswith("sqlite"):
        path = sqlite_file(url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        # The driver keeps this many statements compiled per connection (128 by default): a
        # server runs more distinct ones than that (a list of ids gives a statement per
        # length), and recompiling a bulk INSERT of many rows cost it more than running it.
        # The pool hands out the connection returned last: each connection's page cache is
        # dropped when another one has written since it was used, and the pool's default
        # (the one returned first) handed out the stalest. `submit_profile.py`'s reads of
        # the file: 72,857 before, 31,286 after.
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30, "cached_statements": 1024},
            **({"pool_use_lifo": True} if durable else {"poolclass": SingletonThreadPool}),
        )

        @event.listens_for(engine, "connect")
        def _connect(conn: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
            conn.isolation_level = None  # transactions are begun below, not by the driver
            cur = conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL" if durable else "PRAGMA journal_mode=MEMORY")
            cur.execute("PRAGMA synchronous=NORMAL" if durable else "PRAGMA synchronous=OFF")
            cur.execute("PRAGMA foreign_keys=ON")
            if durable:  # the server checkpoints on a thread of its own (wal_checkpoints.py)
                cur.execute(f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}")
            else:  # its one connection (SingletonThreadPool) keeps the lock
                cur.execute("PRAGMA locking_mode=EXCLUSIVE")
            cur.close()

        # The dialect's own hook, not a "begin" event: any connection event makes every
        # statement of every connection go through the event system (it halved the cost of a
        # transaction that writes a row, and of an empty read).
        engine.dialect.do_begin = _sqlite_begin  # type: ignore[method-assign]  # this engine's
        return engine
    # The connection returned last first, as on SQLite: psycopg prepares a statement on a
    # connection once it has run there five times, so the busy few are prepared soonest.
    engine = create_engine(url, pool_size=10, max_overflow=20, pool_use_lifo=True)
    event.listen(engine, "checkout", _refuse_closed)
    return engine


def _refuse_closed(dbapi_connection: Any, _record: ConnectionPoolEntry, _proxy: Any) -> None:
    """A pooled PostgreSQL connection the server has closed is not handed out: the pool
    replaces it. A server closing a connection (restarting, or its backend terminated) says
    so and closes the socket, either of which leaves an idle connection readable, so one look
    at the socket stands in for a ping: a round trip per transaction, which was about a tenth
    of a one-job submission's CPU (a pool event costs nothing per statement)."""
    if dbapi_connection.closed or dbapi_connection.broken or _readable(dbapi_connection):
        raise DisconnectionError("the database server closed the connection")


def _readable(dbapi_connection: Any) -> bool:
    """Whether anything waits to be read on an idle connection (none of the pool's LISTENs,
    so only the server's goodbye); a connection whose socket is gone counts as readable."""
    try:
        fd = dbapi_connection.fileno()
    except Exception:  # no socket (the driver raises its own error): not usable
        return True
    if not hasattr(select, "poll"):  # Windows
        return bool(select.select([fd], [], [], 0)[0])
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


def _sqlite_begin(dbapi_connection: Any) -> None:
    # Writers take the write lock at BEGIN, so concurrent writers queue on the busy timeout
    # instead of failing to upgrade a read transaction; readers never block.
    dbapi_connection.execute("BEGIN IMMEDIATE" if getattr(_writing, "now", False) else "BEGIN")


def begin_write(conn: Connection) -> RootTransaction:
    """Begin `conn`'s transaction as a writer's (on SQLite, holding the write lock from its
    start); a transaction begun otherwise, or implicitly, is a reader's until it writes."""
    _writing.now = True
    try:
        return conn.begin()
    finally:
        _writing.now = False


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision (Alembic), inside one transaction."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.connect() as conn, begin_write(conn):
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def open_database(url: str, *, durable: bool = True) -> Engine:
    engine = make_engine(url, durable=durable)
    migrate(engine)
    return engine
