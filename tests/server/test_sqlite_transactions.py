"""SQLite's transactions as storage begins them: a writer's holds the database's write lock
from its BEGIN, a reader's (explicit or implicit) never takes it, and each sees one state."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from armada_server.config import ServerConfig
from armada_server.simulation.ports import InProcess
from armada_server.storage.base import Transactions
from armada_server.storage.database import begin_write, open_database


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = open_database(f"sqlite:///{tmp_path / 'armada.db'}")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO queues (name, cordoned, spec) VALUES ('a', 0, x'')"))
    yield engine
    engine.dispose()


def other_writer(engine: Engine) -> sqlite3.Connection:
    """A second connection that gives up at once when the write lock is taken."""
    database = engine.url.database
    assert database is not None
    return sqlite3.connect(database, timeout=0, isolation_level=None)


def takes_the_write_lock(other: sqlite3.Connection) -> bool:
    try:
        other.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as e:
        assert "locked" in str(e)
        return False
    other.execute("ROLLBACK")
    return True


def test_a_writer_holds_the_write_lock_from_its_begin(engine: Engine) -> None:
    other = other_writer(engine)
    with Transactions(engine).write():  # no statement yet
        assert not takes_the_write_lock(other)
    assert takes_the_write_lock(other)
    with engine.connect() as conn, begin_write(conn):
        assert not takes_the_write_lock(other)


def test_readers_never_take_the_write_lock(engine: Engine) -> None:
    other = other_writer(engine)
    with Transactions(engine).read() as conn:
        conn.execute(text("SELECT count(*) FROM queues")).scalar_one()
        assert takes_the_write_lock(other)
    with engine.connect() as conn:  # begun implicitly by its first statement
        conn.execute(text("SELECT count(*) FROM queues")).scalar_one()
        assert takes_the_write_lock(other)


def test_a_read_sees_one_state_whatever_commits_meanwhile(engine: Engine) -> None:
    other = other_writer(engine)
    with Transactions(engine).read() as conn:
        assert conn.execute(text("SELECT count(*) FROM queues")).scalar_one() == 1
        other.execute("INSERT INTO queues (name, cordoned, spec) VALUES ('b', 0, x'')")
        assert conn.execute(text("SELECT count(*) FROM queues")).scalar_one() == 1
    with Transactions(engine).read() as conn:
        assert conn.execute(text("SELECT count(*) FROM queues")).scalar_one() == 2


def test_a_failed_writer_leaves_nothing_and_the_next_begins_afresh(engine: Engine) -> None:
    transactions = Transactions(engine)
    with pytest.raises(RuntimeError), transactions.write() as (conn, _):
        conn.execute(text("INSERT INTO queues (name, cordoned, spec) VALUES ('b', 0, x'')"))
        raise RuntimeError("refused")
    with transactions.write() as (conn, _):
        assert conn.execute(text("SELECT count(*) FROM queues")).scalar_one() == 1
        assert not takes_the_write_lock(other_writer(engine))


@pytest.mark.parametrize(
    ("durable", "synchronous", "journal", "locking"),
    [(True, 1, "wal", "normal"), (False, 0, "memory", "exclusive")],
)
def test_only_a_database_that_outlives_its_process_waits_for_the_disk(
    tmp_path: Path, durable: bool, synchronous: int, journal: str, locking: str
) -> None:
    """The server's database waits for the disk at checkpoints (NORMAL in WAL mode) and is
    shared by its threads' connections; the what-if simulator's, thrown away with its run
    and used by one thread, never waits (OFF), keeps its rollback journal in memory (each
    changed page written once, into the file) and is one connection's, which keeps the
    file's lock (no locking per transaction)."""
    engine = open_database(f"sqlite:///{tmp_path / 'armada.db'}", durable=durable)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == synchronous
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == journal
            assert conn.exec_driver_sql("PRAGMA locking_mode").scalar() == locking
        with engine.connect() as first, engine.connect() as second:
            same = first.connection.dbapi_connection is second.connection.dbapi_connection
            assert same == (not durable)
    finally:
        engine.dispose()


def test_the_simulator_runs_on_a_database_that_is_not_durable(tmp_path: Path) -> None:
    port = InProcess(ServerConfig(), tmp_path / "simulation.db", lambda: datetime.now(UTC))
    try:
        with port.storage.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 0
    finally:
        port.close()


def test_the_connection_returned_last_is_handed_out_first(engine: Engine) -> None:
    """Its page cache is the freshest: one that another connection wrote after is dropped."""
    first, second = engine.connect(), engine.connect()
    used_last = second.connection.dbapi_connection
    first.close()
    second.close()
    with engine.connect() as again:
        assert again.connection.dbapi_connection is used_last
