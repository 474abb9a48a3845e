"""The migrations build exactly the tables and indexes storage/schema.py declares."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import inspect

from armada_server.storage import schema as t
from armada_server.storage.base import ACTIVE_RUN_STATES
from armada_server.storage.database import open_database
from armada_server.storage.executor_runs import active_runs_held_by
from armada_server.storage.leases import active_runs_of
from armada_server.storage.nodes import runs_holding_nodes


def test_migrated_schema_matches_the_declared_one(database_url: str) -> None:
    engine = open_database(database_url)
    found = inspect(engine)
    assert set(found.get_table_names()) - {"alembic_version"} == set(t.metadata.tables)
    for table in t.metadata.tables.values():
        assert {c["name"] for c in found.get_columns(table.name)} == set(table.columns.keys())
        indexes = {
            (i["name"], tuple(i["column_names"]), bool(i["unique"]))
            for i in found.get_indexes(table.name)
        }
        declared = {
            (i.name, tuple(c.name for c in i.columns), bool(i.unique)) for i in table.indexes
        }
        assert indexes == declared, table.name
    engine.dispose()


def test_counting_by_queue_and_state_reads_the_index_alone(tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = open_database(f"sqlite:///{tmp_path / 'armada.db'}")
    with engine.connect() as conn:
        plan = " ".join(
            str(r[-1])
            for r in conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN SELECT queue, state, count(*) FROM jobs GROUP BY state, queue"
            )
        )
    assert "COVERING INDEX ix_jobs_state_queue" in plan, plan
    engine.dispose()


def test_no_write_builds_a_temporary_table(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SQLite checks each row it writes against every partial index's WHERE; one spelled
    with an IN list built the list's table for each row (ix_jobs_finished before migration
    0016 made every UPDATE of a job about four times as costly)."""
    engine = open_database(f"sqlite:///{tmp_path / 'armada.db'}")
    with engine.connect() as conn:
        for table in t.metadata.sorted_tables:
            columns = list(table.columns.keys())
            marks = ", ".join("?" * len(columns))
            sets = ", ".join(f"{c} = ?" for c in columns)
            statements = [
                f'INSERT INTO "{table.name}" ({", ".join(columns)}) VALUES ({marks})',
                f'UPDATE "{table.name}" SET {sets} WHERE rowid = ?',
                f'DELETE FROM "{table.name}" WHERE rowid = ?',
            ]
            for sql in statements:
                args = tuple(range(sql.count("?")))
                ops = [r[1] for r in conn.exec_driver_sql(f"EXPLAIN {sql}", args)]
                assert "OpenEphemeral" not in ops, sql
    engine.dispose()


def test_runs_holding_nodes_are_read_through_their_indexes(database_url: str) -> None:
    """A lease expiry's read and an executor's full read of its active runs, and the nodes'
    loads, find their runs through partial indexes, not by scanning every run kept (the
    plan on an empty table, with PostgreSQL told to avoid scans where it can)."""
    engine = open_database(database_url)
    active, releasing = runs_holding_nodes(datetime(2026, 1, 1, tzinfo=UTC))
    queries = [
        (active_runs_of(["e1", "e2"]), "ix_runs_active"),
        (active_runs_held_by("e1"), "ix_runs_active"),
        (active, "ix_runs_active"),
        (releasing, "ix_runs_releases_at"),
    ]
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("SET enable_seqscan = off")
        for query, index in queries:
            sql = str(query.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
            explain = "EXPLAIN QUERY PLAN " if engine.dialect.name == "sqlite" else "EXPLAIN "
            plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql(explain + sql))
            assert index in plan, plan
    engine.dispose()


def test_the_active_runs_index_holds_the_active_states() -> None:
    assert t.active_run() == "(" + " OR ".join(f"state = {s}" for s in ACTIVE_RUN_STATES) + ")"
