"""Bulk inserts store exactly what SQLAlchemy's own INSERT stores, on both backends."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.exc import DataError, IntegrityError, OperationalError

from armada_server.storage import schema as t
from armada_server.storage.bulk import FEW_ROWS, NewRows, insert_rows
from armada_server.storage.database import open_database
from armada_server.storage.guard import transient
from armada_server.storage.sqlite_statements import (
    LITERALS_FROM_ROWS,
    _literal_columns,
    sqlite_inserts,
    sqlite_portions,
)

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def job_row(job_id: str, **changes) -> dict:  # type: ignore[no-untyped-def]
    row = {
        "id": job_id,
        "queue": "q",
        "job_set": "s",
        "client_id": None,
        "external_job_uri": None,
        "state": 1,
        "priority": 2.5,
        "priority_class": "armada-default",
        "gang_id": None,
        "submitted_at": T0,
        "last_transition_at": T0 + timedelta(microseconds=1),
        "retry_after": None,
        "cancel_requested": False,
        "avoid_node": None,
        "spec": b"\x00\x01spec",
    }
    row.update(changes)
    return row


def stored(conn, job_id: str) -> dict:  # type: ignore[no-untyped-def]
    row = conn.execute(select(t.jobs).where(t.jobs.c.id == job_id)).one()._asdict()
    row.pop("id")
    if row["client_id"]:
        row["client_id"] = row["client_id"][:2]  # "c-a" and "c-b": unique per queue
    return row


def test_rows_match_sqlalchemy_insert(database_url: str) -> None:
    """Rows as SQLAlchemy's INSERT stores them, a few at a time (one INSERT on PostgreSQL)
    and many (COPY)."""
    engine = open_database(database_url)
    many = [job_row(f"filler-{n}") for n in range(FEW_ROWS)]
    with engine.begin() as conn:
        for prefix, write in (
            ("a", lambda rows: conn.execute(insert(t.jobs), rows)),
            ("b", lambda rows: insert_rows(conn, t.jobs, rows)),
            ("c", lambda rows: insert_rows(conn, t.jobs, rows + many)),
        ):
            write(
                [
                    job_row(f"{prefix}1"),
                    job_row(
                        f"{prefix}2",
                        client_id=f"c-{prefix}",
                        cancel_requested=True,
                        priority=0.0,
                        retry_after=T0,
                        avoid_node="n1",
                        spec=b"",
                    ),
                ]
            )
        for n in ("1", "2"):
            assert stored(conn, "b" + n) == stored(conn, "a" + n)
            assert stored(conn, "c" + n) == stored(conn, "a" + n)
        # Defaults fill what a row leaves out; times come back as stored.
        row = stored(conn, "b1")
        assert row["scheduling_reason"] == "" and row["retry_history"] == "{}"
        assert row["cancel_reason"] == "" and row["preempt_requested"] is False
        assert row["submitted_at"].replace(tzinfo=UTC) == T0
    engine.dispose()


def test_nothing_is_written_for_an_unknown_column(database_url: str) -> None:
    engine = open_database(database_url)
    with engine.begin() as conn, pytest.raises(ValueError, match="no column named colour"):
        insert_rows(conn, t.jobs, [job_row("x"), job_row("y", colour="blue")])
    with engine.begin() as conn:
        assert conn.execute(select(t.jobs.c.id)).all() == []
    engine.dispose()


@pytest.mark.parametrize("more", [0, FEW_ROWS], ids=["few", "many"])
@pytest.mark.parametrize(
    ("second", "error"),
    [
        (job_row("x"), IntegrityError),  # a duplicate key: a concurrent submit took it
        (job_row("y", priority_class="p" * 300), DataError),  # longer than the column
    ],
)
def test_refused_rows_raise_sqlalchemy_errors_and_write_nothing(
    database_url: str, second: dict, error: type[Exception], more: int
) -> None:
    """The errors callers handle (a retry on IntegrityError, INVALID_ARGUMENT on DataError)
    are SQLAlchemy's, whichever statement the rows go in by (one INSERT or COPY on
    PostgreSQL)."""
    engine = open_database(database_url)
    if engine.dialect.name == "sqlite" and error is DataError:
        pytest.skip("SQLite does not enforce text lengths")
    filler = [job_row(f"filler-{n}") for n in range(more)]
    with pytest.raises(error), engine.begin() as conn:
        insert_rows(conn, t.jobs, [job_row("x"), *filler, second])
    with engine.begin() as conn:
        assert conn.execute(select(t.jobs.c.id)).all() == []
    engine.dispose()


@pytest.mark.parametrize("more", [0, FEW_ROWS], ids=["insert", "copy"])
def test_a_deadlocked_insert_raises_the_error_transactions_are_retried_on(
    postgres_server,  # type: ignore[no-untyped-def]
    more: int,
) -> None:
    """Two transactions each insert a row the other holds (by one INSERT, or by COPY with
    more rows): PostgreSQL ends one as a deadlock, which reaches the caller as SQLAlchemy's
    error that `retried` runs again (the driver's own error escaped every retry)."""
    engine = open_database(postgres_server.new_database())
    first, second = engine.connect(), engine.connect()
    first.begin()
    second.begin()
    insert_rows(first, t.jobs, [job_row("a")])
    insert_rows(second, t.jobs, [job_row("b")])
    failures: list[BaseException] = []

    def take(conn, job_id: str) -> None:  # type: ignore[no-untyped-def]
        filler = [job_row(f"{job_id}-filler-{n}") for n in range(more)]
        try:
            insert_rows(conn, t.jobs, [*filler, job_row(job_id)])
        except BaseException as e:  # reported below
            failures.append(e)
            conn.rollback()

    threads = [
        threading.Thread(target=take, args=(first, "b")),
        threading.Thread(target=take, args=(second, "a")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    try:
        [failure] = failures
        assert isinstance(failure, OperationalError), repr(failure)
        assert transient(failure)
    finally:
        first.close()
        second.close()
        engine.dispose()


@pytest.mark.parametrize(
    ("rows", "width", "limit", "counts"),
    [
        (0, 20, 32766, []),
        (1, 20, 32766, [1]),
        (1000, 20, 32766, [128] * 7 + [64, 32, 8]),
        (1000, 30, 999, [32] * 31 + [8]),
        (7, 400, 999, [2, 2, 2, 1]),
        (3, 2000, 999, [1, 1, 1]),  # wider than the limit: a row at a time
    ],
)
def test_sqlite_rows_go_in_portions_of_few_shapes(
    rows: int, width: int, limit: int, counts: list[int]
) -> None:
    portions = list(sqlite_portions(rows, width, limit))
    assert [count for _, count in portions] == counts
    assert [start for start, _ in portions] == [sum(counts[:i]) for i in range(len(counts))]


@pytest.mark.parametrize(("width", "limit"), [(1, 999), (21, 999), (30, 32766), (1000, 999)])
def test_sqlite_portions_cover_every_row_within_the_limit(width: int, limit: int) -> None:
    """For every count of rows: each row once and in order, no statement over the limit
    (but one row, which goes alone), powers of two only, so a table has few shapes."""
    shapes: set[int] = set()
    for rows in range(0, 1100):
        covered = 0
        for start, count in sqlite_portions(rows, width, limit):
            assert start == covered
            assert count * width <= limit or count == 1
            assert count & (count - 1) == 0
            covered += count
            shapes.add(count)
        assert covered == rows
    assert len(shapes) <= 8


def test_many_rows_go_to_sqlite_in_few_statements(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The driver lets go of the interpreter around each statement's step, each row of an
    executemany, and waits for it back behind any busy thread: 1,000 rows go in by a few
    statements, each as SQLAlchemy's INSERT would store its rows."""
    engine = open_database(f"sqlite:///{tmp_path / 'bulk.db'}")
    rows = [job_row(f"j{n:04d}", priority=float(n), avoid_node=f"n{n % 7}") for n in range(1000)]
    with engine.begin() as conn:
        run: list[str] = []
        driver = conn.connection.dbapi_connection
        driver.set_trace_callback(run.append)  # type: ignore[union-attr]
        insert_rows(conn, t.jobs, rows)
        driver.set_trace_callback(None)  # type: ignore[union-attr]
        inserts = [sql for sql in run if sql.startswith('INSERT INTO "jobs"')]
        assert 1 <= len(inserts) <= 10, len(inserts)
        conn.execute(insert(t.jobs), [job_row("a0001", priority=1.0, avoid_node="n1")])
        assert stored(conn, "j0001") == stored(conn, "a0001")
        assert conn.execute(select(func.count()).select_from(t.jobs)).scalar() == 1001
        got = conn.execute(select(t.jobs.c.id, t.jobs.c.priority).order_by(t.jobs.c.id)).all()
        assert [(r.id, r.priority) for r in got[1:]] == [(f"j{n:04d}", n) for n in range(1000)]
    engine.dispose()


def test_values_every_row_shares_are_written_as_sqlite_literals(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A batch's columns that hold one of a few plain values in every row (no cancel, no
    node to avoid, ...) are written into the INSERT rather than bound per row, and stored as
    SQLAlchemy's INSERT stores them: the same values, of the same SQLite types."""
    engine = open_database(f"sqlite:///{tmp_path / 'literals.db'}")
    changes = {
        "state": 0,
        "cancel_requested": True,
        "cancel_reason": "",
        "retry_history": "{}",
        "version": 0,
        "priority": 0.0,
    }
    rows = [job_row(f"j{n:04d}", **changes) for n in range(40)]
    rows[7]["avoid_node"] = "n7"  # one row differs: that column stays bound
    columns = ["state", "cancel_requested", "cancel_reason", "retry_history", "version"]
    columns += ["priority", "avoid_node", "external_job_uri", "spec"]
    typed = ", ".join(f"typeof({c}), {c}" for c in columns)
    with engine.begin() as conn:
        made = NewRows("sqlite", t.jobs, rows)
        statements = sqlite_inserts(conn, "jobs", made.names, made.values)
        shared = {"client_id", "external_job_uri", "state", "gang_id", "retry_after"}
        shared |= {"cancel_requested", "cancel_reason", "cancel_user", "cancelled_at"}
        shared |= {"preempt_requested", "failure_reason", "scheduling_reason", "reason_cycle"}
        shared |= {"retry_history", "version", "task"}  # not priority (a float), avoid_node
        bound = len(made.names) - len(shared)
        assert sum(len(params) for _, params in statements) == 40 * bound
        assert all("NULL" in sql and "''" in sql for sql, _ in statements)
        insert_rows(conn, t.jobs, rows)
        conn.execute(insert(t.jobs), [job_row("a0007", **changes, avoid_node="n7")])
        conn.execute(insert(t.jobs), [job_row("a0001", **changes)])
        for ours, theirs in (("j0001", "a0001"), ("j0007", "a0007")):
            assert stored(conn, ours) == stored(conn, theirs)
            got = [
                conn.exec_driver_sql(f"SELECT {typed} FROM jobs WHERE id = ?", (i,)).one()
                for i in (ours, theirs)
            ]
            assert got[0] == got[1]
        avoided = conn.execute(select(t.jobs.c.id).where(t.jobs.c.avoid_node.is_not(None)))
        assert sorted(r.id for r in avoided) == ["a0007", "j0007"]
    engine.dispose()


def test_only_columns_shared_by_every_row_of_a_large_batch_are_literals() -> None:
    shared = [(f"id{n}", None, False, "", "{}", 0, 1.5, b"") for n in range(20)]
    assert _literal_columns(shared) == (None, "NULL", "0", "''", "'{}'", "0", None, None)
    mixed = [(*row[:2], n == 3, *row[3:]) for n, row in enumerate(shared)]
    assert _literal_columns(mixed)[2] is None and _literal_columns(mixed)[1] == "NULL"
    assert set(_literal_columns(shared[: LITERALS_FROM_ROWS - 1])) == {None}
