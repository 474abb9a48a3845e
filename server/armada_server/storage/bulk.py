"""Bulk statements without SQLAlchemy's per-row parameter and result handling.

Submissions, scheduling cycles and executor syncs read and write tens of thousands of rows
whose values mostly repeat (one timestamp, one queue, one job set). SQLAlchemy converts every
value of every row in Python on its way to and from the driver (a datetime is formatted or
parsed per value), which was most of the cost of those writes. Here conversions run once per
distinct value and rows go to the driver's cursor as they are: the same statements, the same
stored forms (datetimes on SQLite as UTC text "YYYY-MM-DD HH:MM:SS.ffffff", timezone dropped,
as SQLAlchemy's SQLite DateTime stores them), the same transaction. On PostgreSQL these
functions take SQLAlchemy's own path (its multi-row INSERTs are already fast there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, DateTime, LargeBinary, Table, insert
from sqlalchemy.engine import Dialect


@dataclass(frozen=True)
class _Plan:
    sql: str
    columns: tuple[str, ...]  # the statement's parameters, in its order
    defaults: tuple[Any, ...]  # the value when a row leaves the column out
    processors: tuple[Callable[[Any], Any] | None, ...]


_plans: dict[str, _Plan] = {}


def _sqlite_plan(table: Table, dialect: Dialect) -> _Plan:
    plan = _plans.get(table.name)
    if plan is None:
        compiled = insert(table).compile(dialect=dialect,
                                         column_keys=[c.key for c in table.columns])
        columns = list(compiled.positiontup or ())  # an INSERT's parameters are its columns
        defaults, processors = [], []
        for name in columns:
            column = table.columns[name]
            default = column.default
            if default is not None and not default.is_scalar:
                raise ValueError(f"{table.name}.{name}: only scalar defaults are supported")
            defaults.append(default.arg if default is not None else None)
            # sqlite3 takes bytes as they are: SQLAlchemy's wrapping of each value in the
            # driver's Binary type is only needed by other drivers.
            binary = isinstance(column.type, LargeBinary)
            processors.append(None if binary else
                              column.type.dialect_impl(dialect).bind_processor(dialect))
        plan = _plans[table.name] = _Plan(str(compiled), tuple(columns), tuple(defaults),
                                          tuple(processors))
    return plan


def insert_rows(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """INSERT every row (a mapping of column name to value), all or none."""
    if not rows:
        return
    known = set(table.columns.keys())
    for row in rows:
        if not known.issuperset(row):
            unknown = ", ".join(sorted(set(row) - known))
            raise ValueError(f"{table.name}: no column named {unknown}")
    if conn.dialect.name != "sqlite":
        # SQLAlchemy sends these as multi-row INSERTs ("insertmanyvalues"), which beats the
        # driver's executemany on PostgreSQL.
        conn.execute(insert(table), list(rows))
        return
    plan = _sqlite_plan(table, conn.dialect)
    values: list[list[Any]] = []
    for column, default, process in zip(plan.columns, plan.defaults, plan.processors,
                                        strict=True):
        raw = [row.get(column, default) for row in rows]
        if process is not None:
            seen: dict[Any, Any] = {}
            converted = []
            for value in raw:
                try:
                    out = seen[value]
                except KeyError:
                    out = seen[value] = process(value)
                except TypeError:  # unhashable: convert every time
                    out = process(value)
                converted.append(out)
            raw = converted
        values.append(raw)
    conn.exec_driver_sql(plan.sql, list(zip(*values, strict=True)))

_COMPILED: dict[tuple, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
_FORMATTED: dict[datetime, str] = {}


def fetch(conn: Connection, stmt) -> list[Sequence]:  # type: ignore[no-untyped-def]
    """The rows of a select as plain tuples; on SQLite straight from the driver, so times
    come back as text (read them with rows.when)."""
    if conn.dialect.name != "sqlite":
        return [tuple(r) for r in conn.execute(stmt)]
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    args = [sqlite_value(params[n]) for n in compiled.positiontup or ()]
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        return cursor.execute(compiled.string, args).fetchall()
    finally:
        cursor.close()


def sqlite_value(value: object) -> object:
    """A parameter as SQLAlchemy's SQLite dialect would send it."""
    if isinstance(value, datetime) and value.tzinfo is UTC:
        text = _FORMATTED.get(value)
        if text is None:
            if len(_FORMATTED) >= 4096:
                _FORMATTED.clear()
            text = _FORMATTED[value] = value.isoformat(" ", "microseconds")[:26]
        return text
    if isinstance(value, datetime):
        return value.isoformat(" ", "microseconds")[:26]
    return value


def executemany(conn: Connection, stmt, rows: Sequence[dict]) -> None:  # type: ignore[no-untyped-def]
    """`conn.execute(stmt, rows)` for an UPDATE or INSERT that is a module constant (its
    compiled form is cached per statement and set of keys). The rows are the caller's
    throwaway dicts: on SQLite their times are replaced by text."""
    if not rows:
        return
    if conn.dialect.name != "sqlite":
        conn.execute(stmt, rows)
        return
    keys = tuple(rows[0])
    found = _COMPILED.get((id(stmt), keys))
    if found is None:
        compiled = stmt.compile(dialect=conn.dialect, column_keys=list(keys))
        names = tuple(compiled.positiontup or ())
        columns = stmt.table.c
        dated = tuple(n for n in names
                      if n in columns and isinstance(columns[n].type, DateTime))
        found = _COMPILED[(id(stmt), keys)] = (compiled.string, names, dated)
    sql, names, dated = found
    for r in rows:
        for n in dated:
            if r[n] is not None:
                r[n] = sqlite_value(r[n])
    if len(names) == 1:
        params = [(r[names[0]],) for r in rows]
    else:
        values = itemgetter(*names)
        params = [values(r) for r in rows]
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.executemany(sql, params)
    finally:
        cursor.close()
