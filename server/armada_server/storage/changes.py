"""Change numbers: which jobs changed since a reader last looked.

Every write of a job's row stamps it with a change number (`jobs.changed`), so that the
scheduling loop reads only the jobs that changed since its last cycle instead of every queued
and running job (held_jobs.HeldJobs), and an executor's sync only the runs of the jobs that
changed since its last sync (executor_runs). A reader takes a *mark* in the same snapshot as
its rows; its next read takes the rows whose number is at least that mark. The numbers need
not be unique nor dense, only never below the mark of a snapshot that did not see the write:

- SQLite serialises writers: a write stamps the value of `change_clock`, which the reader
  moves on just before each read and reads as its mark in the read's snapshot (a sync does
  both inside its write transaction). Every write before the move stamped less and is in the
  snapshot; a write after it stamps the mark or more (only those committed between the move
  and the snapshot are read twice).
- PostgreSQL runs writers side by side, so a counter read inside a transaction may be
  committed late. A write stamps its transaction's id instead, and the mark is the oldest
  transaction still running at the snapshot (`pg_snapshot_xmin`): every transaction below it
  had ended, and its writes were in the snapshot.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Connection, literal_column, text
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from armada_server.storage.bulk import execute, fetch

#: Seconds (of time.monotonic(), not the server's clock, which the simulator runs fast)
#: between a reader's reads of everything: the net under writes made outside the server,
#: which stamp no change number.
FULL_READ_EVERY = 600.0


class change_number(FunctionElement[int]):
    """The change number a write stamps on the rows it writes (see the module docstring)."""

    type = BigInteger()
    inherit_cache = True


@compiles(change_number, "sqlite")
def _sqlite(element: change_number, compiler: Any, **kw: Any) -> str:
    return "(SELECT n FROM change_clock)"


@compiles(change_number, "postgresql")
def _postgresql(element: change_number, compiler: Any, **kw: Any) -> str:
    return "CAST(CAST(pg_current_xact_id() AS TEXT) AS BIGINT)"


_MARK_SQL = {
    "sqlite": "SELECT n FROM change_clock",
    "postgresql": "SELECT CAST(CAST(pg_snapshot_xmin(pg_current_snapshot()) AS TEXT) AS BIGINT)",
}
_MARK = {dialect: text(sql) for dialect, sql in _MARK_SQL.items()}
_MOVE_ON = text("UPDATE change_clock SET n = n + 1")


def mark(conn: Connection) -> int:
    """Where the next read of what changed starts: read it in the snapshot of the rows read."""
    [(value,)] = fetch(conn, _MARK[conn.dialect.name])
    return int(value)


def mark_column(dialect: str) -> ColumnElement[int]:
    """The mark as a column of a select, read in the snapshot of the select's other columns
    (one statement is one snapshot on either database)."""
    return literal_column(f"({_MARK_SQL[dialect]})", BigInteger())


def move_on(conn: Connection) -> None:
    """Before a read that takes a mark: later writes stamp more than the writes so far
    (SQLite's clock; a no-op on PostgreSQL, whose transaction ids move on by themselves)."""
    if conn.dialect.name == "sqlite":
        execute(conn, _MOVE_ON)
