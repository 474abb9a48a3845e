"""`fetch` reads what SQLAlchemy's own execution reads, also when a select of one shape is
run again with other values (SQLite reuses its compiled form) and for the forms it leaves
to SQLAlchemy (empty and tuple lists, LIMIT)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import and_, bindparam, func, select, text, tuple_
from sqlalchemy.exc import DBAPIError

from armada_server.storage import schema as t
from armada_server.storage.bulk import _postgresql_statement, fetch, insert_rows
from armada_server.storage.database import open_database
from armada_server.storage.rows import when

from ..postgres import PostgresServer
from .test_bulk_insert import T0, job_row


def plain(row: Sequence[Any]) -> tuple[Any, ...]:
    """A row with its times as aware datetimes, however the driver gave them."""
    return tuple(
        when(v).replace(tzinfo=UTC) if isinstance(v, str | datetime) and i == 2 else v
        for i, v in enumerate(row)
    )


def test_fetch_reads_what_sqlalchemy_reads(database_url: str) -> None:
    engine = open_database(database_url)
    with engine.begin() as conn:
        insert_rows(
            conn,
            t.jobs,
            [
                job_row(f"j{i}", state=i % 3, submitted_at=T0 + timedelta(seconds=i))
                for i in range(9)
            ],
        )

        def shaped(ids: list[str], states: list[int], after: int) -> object:
            return (
                select(t.jobs.c.id, t.jobs.c.state, t.jobs.c.submitted_at)
                .where(
                    t.jobs.c.id.in_(ids),
                    t.jobs.c.state.not_in(states),
                    t.jobs.c.submitted_at >= T0 + timedelta(seconds=after),
                    t.jobs.c.id.in_(select(t.jobs.c.id).where(t.jobs.c.priority > 1)),
                )
                .order_by(t.jobs.c.id)
            )

        cases = [
            shaped(["j1", "j2", "j4", "j5"], [0], 2),
            shaped(["j8"], [0, 1], 0),  # the same shape, other values and list lengths
            shaped(["j0", "j3", "j6", "j7", "j8"], [], 1),  # an empty NOT IN: every state
            shaped([], [0], 0),  # an empty IN: nothing
            select(t.jobs.c.id)
            .where(tuple_(t.jobs.c.id, t.jobs.c.state).in_([("j1", 1), ("j2", 0), ("j5", 2)]))
            .order_by(t.jobs.c.id)
            .limit(2),
            select(t.jobs.c.id).where(and_(t.jobs.c.state == 2, t.jobs.c.id != "j2")),
            # A value rendered into the SQL, with no list beside it.
            select(t.jobs.c.id).where(t.jobs.c.state == bindparam("s", 1, literal_execute=True)),
        ]
        for stmt in cases:
            expected = [plain(r) for r in conn.execute(stmt)]  # type: ignore[call-overload]
            assert [plain(r) for r in fetch(conn, stmt)] == expected, stmt  # type: ignore[arg-type]
        assert [r[0] for r in fetch(conn, shaped(["j8"], [0, 1], 0))] == ["j8"]  # type: ignore[arg-type]
        assert fetch(conn, shaped(["j8"], [2], 0)) == []  # type: ignore[arg-type]
        # A statement built once, its values given per call.
        by_state = select(t.jobs.c.id).where(t.jobs.c.state == bindparam("state"))
        for state in (0, 1, 2, 0):
            expected = [
                tuple(r) for r in conn.execute(by_state.order_by(t.jobs.c.id), {"state": state})
            ]
            assert [
                tuple(r) for r in fetch(conn, by_state.order_by(t.jobs.c.id), {"state": state})
            ] == expected
            assert len(expected) == 3
    engine.dispose()


@pytest.mark.postgres
def test_postgresql_runs_on_the_driver_only_what_it_reads_alike(
    postgres_server: PostgresServer,
) -> None:
    """Lists of plain values and converted parameters (booleans) go to the driver, and read
    what SQLAlchemy reads; a column SQLAlchemy converts on the way out (a numeric) is left
    to it."""
    engine = open_database(postgres_server.new_database())
    with engine.begin() as conn:
        insert_rows(conn, t.queues, [{"name": n, "cordoned": n == "b", "spec": b""} for n in "abc"])
        cases: list[tuple[Any, bool]] = [
            (select(t.queues.c.name).where(t.queues.c.cordoned == bindparam("c")), True),
            (select(t.queues.c.name).where(t.queues.c.name.in_(["a", "c", "x"])), True),
            (select(t.queues.c.name, (func.length(t.queues.c.name) * 1.5).label("n")), False),
        ]
        for stmt, on_driver in cases:
            ordered = stmt.order_by(t.queues.c.name)
            params = {"c": True}
            expected = [tuple(r) for r in conn.execute(ordered, params)]
            assert [tuple(r) for r in fetch(conn, ordered, params)] == expected
            assert (_postgresql_statement(conn, ordered, params) is not None) == on_driver
        assert [r[0] for r in fetch(conn, cases[0][0], {"c": True})] == ["b"]
    engine.dispose()


@pytest.mark.postgres
def test_a_connection_lost_under_the_driver_is_not_pooled_again(
    postgres_server: PostgresServer,
) -> None:
    engine = open_database(postgres_server.new_database())
    by_name = select(t.queues.c.name).where(t.queues.c.name == bindparam("name"))
    with engine.connect() as conn:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        conn.rollback()
        with engine.begin() as other:
            other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        with pytest.raises(DBAPIError) as lost:
            fetch(conn, by_name, {"name": "a"})
        assert lost.value.connection_invalidated
        assert conn.invalidated
    with engine.connect() as conn:  # a new connection, and the driver's path again
        assert fetch(conn, by_name, {"name": "a"}) == []
        assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one() != pid
    engine.dispose()
