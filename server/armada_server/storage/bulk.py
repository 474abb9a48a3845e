"""Bulk inserts without SQLAlchemy's per-row parameter handling.

A submission of thousands of jobs writes thousands of rows whose values mostly repeat (one
timestamp, one queue, one job set). SQLAlchemy converts every value of every row on its way to
the driver; here each column's conversion runs once per distinct value in the batch, and the
rows go to the driver's executemany as they are. Same statement, same conversions, same
transaction: only the bookkeeping differs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, LargeBinary, Table, insert
from sqlalchemy.engine import Dialect


@dataclass(frozen=True)
class _Plan:
    sql: str
    columns: tuple[str, ...]  # the statement's parameters, in its order
    defaults: tuple[Any, ...]  # the value when a row leaves the column out
    processors: tuple[Callable[[Any], Any] | None, ...]
    positional: bool


_plans: dict[tuple[str, str], _Plan] = {}


def _plan(table: Table, dialect: Dialect) -> _Plan:
    key = (table.name, dialect.name)
    plan = _plans.get(key)
    if plan is None:
        compiled = insert(table).compile(dialect=dialect,
                                         column_keys=[c.key for c in table.columns])
        # An INSERT's parameters are named after their columns.
        columns = list(compiled.positiontup) if dialect.positional else [
            c.key for c in table.columns]
        defaults, processors = [], []
        for name in columns:
            column = table.columns[name]
            default = column.default
            if default is not None and not default.is_scalar:
                raise ValueError(f"{table.name}.{name}: only scalar defaults are supported")
            defaults.append(default.arg if default is not None else None)
            # Both drivers (sqlite3, psycopg) take bytes as they are; SQLAlchemy's wrapping
            # of each value in the driver's Binary type is only needed by others.
            binary = isinstance(column.type, LargeBinary)
            processors.append(None if binary else
                              column.type.dialect_impl(dialect).bind_processor(dialect))
        plan = _plans[key] = _Plan(str(compiled), tuple(columns),
                                   tuple(defaults), tuple(processors), dialect.positional)
    return plan


def insert_rows(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """INSERT every row (a mapping of column name to value) in one executemany."""
    if not rows:
        return
    if conn.dialect.driver not in ("pysqlite", "psycopg"):
        conn.execute(insert(table), list(rows))  # a driver not measured here: the usual way
        return
    plan = _plan(table, conn.dialect)
    known = set(plan.columns)
    for row in rows:
        if not known.issuperset(row):
            unknown = ", ".join(sorted(set(row) - known))
            raise ValueError(f"{table.name}: no column named {unknown}")
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
    if plan.positional:
        params: list[Any] = list(zip(*values, strict=True))
    else:
        params = [dict(zip(plan.columns, row, strict=True)) for row in zip(*values, strict=True)]
    conn.exec_driver_sql(plan.sql, params)
