"""Bulk updates (`bulk.executemany`) write and count what one UPDATE per row would, on both
backends; on SQLite many rows go in a few statements (one step each of the driver, which
lets go of the interpreter per step)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update

from armada_server.storage import changes
from armada_server.storage import schema as t
from armada_server.storage.base import UPDATE_JOBS, UPDATE_RUNS
from armada_server.storage.bulk import executemany, insert_rows
from armada_server.storage.database import open_database

from .test_bulk_insert import job_row

T1 = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


def _jobs(conn, n: int) -> None:  # type: ignore[no-untyped-def]
    insert_rows(conn, t.jobs, [job_row(f"j{i:04d}", version=i % 3) for i in range(n)])


def _stored(conn) -> list[tuple]:  # type: ignore[no-untyped-def]
    c = t.jobs.c
    rows = conn.execute(
        select(c.id, c.version, c.state, c.last_transition_at, c.avoid_node).order_by(c.id)
    ).all()
    return [(r[0], r[1], r[2], r[3].replace(tzinfo=UTC), r[4]) for r in rows]


def test_guarded_updates_match_one_update_per_row(database_url: str) -> None:
    """Rows found by id and the version they were read at, of which some are stale: the
    same rows change, to the same values, and the same count comes back as from
    SQLAlchemy's UPDATE per row."""
    engine = open_database(database_url)
    n = 300

    def rows() -> list[dict]:
        return [
            {
                "_id": f"j{i:04d}",
                "_version": i % 3 if i % 10 else 7,  # every tenth was changed since it was read
                "version": i % 3 + 1,
                "state": 4,
                "last_transition_at": T1 + timedelta(microseconds=i),
                "avoid_node": None if i % 2 else f"n{i}",
            }
            for i in reversed(range(n))  # written in order of id whatever the order given
        ]

    with engine.begin() as conn:
        _jobs(conn, n)
        matched = executemany(conn, UPDATE_JOBS, rows())
        bulk = _stored(conn)
    with engine.begin() as conn:
        conn.execute(t.jobs.delete())
        _jobs(conn, n)
        one_by_one = sum(conn.execute(UPDATE_JOBS, [row]).rowcount for row in rows())
        alone = _stored(conn)
    assert matched == one_by_one == n - n // 10
    assert bulk == alone
    assert bulk[1] == ("j0001", 2, 4, T1 + timedelta(microseconds=1), None)
    assert bulk[10][1:3] == (1, 1)  # stale: unchanged
    engine.dispose()


def test_many_rows_go_to_sqlite_in_few_statements(tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = open_database(f"sqlite:///{tmp_path / 'bulk.db'}")
    with engine.begin() as conn:
        _jobs(conn, 1000)
        before = dict(conn.execute(select(t.jobs.c.id, t.jobs.c.changed)).all())
        changes.move_on(conn)  # as a reader of what changed does
        run: list[str] = []
        driver = conn.connection.dbapi_connection
        driver.set_trace_callback(run.append)  # type: ignore[union-attr]
        rows = [{"_id": f"j{i:04d}", "_version": i % 3, "state": 2} for i in range(1000)]
        assert executemany(conn, UPDATE_JOBS, rows) == 1000
        driver.set_trace_callback(None)  # type: ignore[union-attr]
        assert 1 <= len([sql for sql in run if sql.startswith('UPDATE "jobs"')]) <= 10
        assert {r[2] for r in _stored(conn)} == {2}
        # The change number every UPDATE of a job sets, as SQLAlchemy's UPDATE sets it.
        after = dict(conn.execute(select(t.jobs.c.id, t.jobs.c.changed)).all())
        assert all(after[j] > before[j] for j in before)
    engine.dispose()


@pytest.mark.parametrize("statement", ["duplicates", "other_shape"])
def test_what_many_rows_cannot_say_goes_row_by_row(database_url: str, statement: str) -> None:
    """Two rows for one run are written in their order (the later wins); an UPDATE found
    otherwise than by equal columns is written as it says."""
    engine = open_database(database_url)
    with engine.begin() as conn:
        _jobs(conn, 3)
        insert_rows(
            conn,
            t.runs,
            [
                {
                    "id": f"r{i}",
                    "job_id": f"j{i:04d}",
                    "run_index": 0,
                    "cluster_id": "e",
                    "node": "",
                }
                | {"pool": "p", "state": 1, "leased_at": T1}
                for i in range(3)
            ],
        )
        if statement == "duplicates":
            rows = [
                {"_id": "r1", "node": "first"},
                {"_id": "r1", "node": "second"},
                {"_id": "r2", "node": "n2"},
            ]
            assert executemany(conn, UPDATE_RUNS, rows) == 3
            want = {"r0": "", "r1": "second", "r2": "n2"}
        else:
            stmt = update(t.runs).where(t.runs.c.id <= t.runs.c.job_id)  # never: "r" > "j"
            assert executemany(conn, stmt, [{"node": "x"}, {"node": "y"}]) == 0
            want = {"r0": "", "r1": "", "r2": ""}
        got = dict(conn.execute(select(t.runs.c.id, t.runs.c.node)).all())
        assert got == want
    engine.dispose()
