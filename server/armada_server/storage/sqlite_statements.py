"""SQLite's bulk writes as statements of many rows each (`bulk` runs them).

The sqlite3 module lets go of the interpreter's lock around each step of a statement, and an
executemany steps once per row. Taking the lock back, a thread waits behind whichever thread
holds it then, for up to a switch interval: with any other thread busy in Python, every row
of an executemany waited one out, and a transaction of a thousand rows held SQLite's one
write lock twenty times as long as it took alone (every other writer, and the events of
its jobs, waiting behind it). A statement of many rows is one step.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

from sqlalchemy import Column, ColumnElement, Connection, Table, Update
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import BinaryExpression, BindParameter, BooleanClauseList
from sqlalchemy.sql.schema import ColumnElementColumnDefault

Statements = list[tuple[str, list[Any]]]  # SQL and its parameters, in order


# Rows per statement at most.
MOST_ROWS = 128
_limit: list[int] = []  # the driver's bound on parameters per statement, once known


def _parameters(conn: Connection) -> int:
    """How many parameters a SQLite statement may have (999 before SQLite 3.32, 32,766
    after, unless built otherwise)."""
    if not _limit:
        driver = conn.connection.dbapi_connection
        limit = 999
        if isinstance(driver, sqlite3.Connection):
            limit = driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        _limit.append(limit)
    return _limit[0]


def sqlite_portions(rows: int, width: int, limit: int) -> Iterator[tuple[int, int]]:
    """`rows` rows of `width` parameters each as portions (first row, how many), each for
    one statement of at most `limit` parameters. Portions are powers of two (the largest as
    many times as it fits, then the rest in binary), so that a table's statements come in a
    few shapes, which the driver keeps compiled."""
    most = max(1, min(MOST_ROWS, limit // max(width, 1)))
    size = 1 << (most.bit_length() - 1)
    start = 0
    while rows - start >= size:
        yield start, size
        start += size
    while size > 1 and start < rows:
        size >>= 1
        if rows - start >= size:
            yield start, size
            start += size


# (table, its columns in order, rows, the columns written as literals) -> the INSERT.
_INSERT_SQL: dict[tuple[str, tuple[str, ...], int, tuple[str | None, ...]], str] = {}

# Values a column of every row may hold, as SQLite's literals. A batch whose rows all hold one
# of them in a column has it written into the statement instead of bound per row: a new job's
# row holds a dozen (no cancel, no failure, version 0...), and binding them was about a sixth
# of inserting it. Only these few, so a table's statements still come in a few shapes; the
# column's affinity stores a literal as it stores the bound value.
_LITERALS: dict[object, str] = {None: "NULL", False: "0", True: "1", "": "''", "{}": "'{}'"}
_LITERAL_TYPES = (type(None), bool, int, str)
# Batches of fewer rows bind every value: their shapes would vary more, for little gain.
LITERALS_FROM_ROWS = 16


def _literal_columns(rows: Sequence[tuple[Any, ...]]) -> tuple[str | None, ...]:
    """For each column, the literal every row holds in it, or None (bound per row)."""
    first = rows[0]
    none: tuple[str | None, ...] = (None,) * len(first)
    if len(rows) < LITERALS_FROM_ROWS:
        return none
    candidates = [i for i, v in enumerate(first) if type(v) in _LITERAL_TYPES and v in _LITERALS]
    if not candidates:
        return none
    if len(candidates) > 1:
        pick = itemgetter(*candidates)
        if len(set(map(pick, rows))) != 1:  # not all constant: column by column
            candidates = [i for i in candidates if len({row[i] for row in rows}) == 1]
    elif len({row[candidates[0]] for row in rows}) != 1:
        return none
    literals = list(none)
    for i in candidates:
        literals[i] = _LITERALS[first[i]]
    return tuple(literals)


def sqlite_inserts(
    conn: Connection, table: str, names: tuple[str, ...], rows: Sequence[tuple[Any, ...]]
) -> Statements:
    """The INSERTs of `rows` (values of the columns `names`, in order) into `table`."""
    statements: Statements = []
    literals = _literal_columns(rows)
    bound = [i for i, literal in enumerate(literals) if literal is None]
    if len(bound) == len(names):
        values: Sequence[Sequence[Any]] = rows
    elif len(bound) == 1:
        values = [(row[bound[0]],) for row in rows]
    elif bound:
        values = list(map(itemgetter(*bound), rows))
    else:
        values = [()] * len(rows)
    for start, count in sqlite_portions(len(rows), len(bound), _parameters(conn)):
        key = (table, names, count, literals)
        sql = _INSERT_SQL.get(key)
        if sql is None:
            columns = ", ".join(f'"{n}"' for n in names)
            marks = "(" + ", ".join("?" if lit is None else lit for lit in literals) + ")"
            sql = _INSERT_SQL[key] = f'INSERT INTO "{table}" ({columns}) VALUES ' + ", ".join(
                [marks] * count
            )
        statements.append((sql, list(chain.from_iterable(values[start : start + count]))))
    return statements


# (statement's id, its rows' keys) -> what finds a row and what is set (None: the statement
# is not of the shape `sqlite_updates` writes).
_UPDATE_SHAPES: dict[tuple[int, tuple[str, ...]], _UpdateShape | None] = {}
_UPDATE_SQL: dict[tuple[int, tuple[str, ...], int], str] = {}


def sqlite_updates(
    conn: Connection, stmt: Update, keys: tuple[str, ...], rows: Sequence[dict[str, Any]]
) -> Statements | None:
    """`stmt` for each of `rows` (values by `keys`) as UPDATEs of many rows each. None for
    a statement of another shape, or rows that find one row twice, which an executemany
    writes one after the other."""
    shape_key = (id(stmt), keys)
    if shape_key not in _UPDATE_SHAPES:
        try:
            _UPDATE_SHAPES[shape_key] = _UpdateShape(stmt, keys, conn.dialect)
        except ValueError:
            _UPDATE_SHAPES[shape_key] = None
    shape = _UPDATE_SHAPES[shape_key]
    if shape is None:
        return None
    params = [shape.keys(r) for r in rows]
    found = len(shape.found)
    if len({p[:found] for p in params}) != len(params):
        return None
    statements: Statements = []
    width = found + len(shape.set)
    for start, count in sqlite_portions(len(params), width, _parameters(conn)):
        sql = _UPDATE_SQL.get((*shape_key, count))
        if sql is None:
            sql = _UPDATE_SQL[(*shape_key, count)] = shape.sql(count)
        statements.append((sql, list(chain.from_iterable(params[start : start + count]))))
    return statements


class _UpdateShape:
    """An UPDATE whose rows are found by columns equal to parameters (`found`: column,
    parameter) and set the rows' other keys (`set`: columns) and the columns the table sets
    on every update (`also`: column, SQL)."""

    __slots__ = ("also", "found", "keys", "set", "table")

    def __init__(self, stmt: Update, keys: tuple[str, ...], dialect: Dialect) -> None:
        if not isinstance(stmt.table, Table):
            raise ValueError("not an UPDATE of one table")
        self.table = stmt.table.name
        self.found: list[tuple[str, str]] = []
        where = stmt.whereclause
        clauses = list(where.clauses) if isinstance(where, BooleanClauseList) else [where]
        if isinstance(where, BooleanClauseList) and where.operator is not operators.and_:
            raise ValueError("not a conjunction")
        for clause in clauses:
            if not (
                isinstance(clause, BinaryExpression)
                and clause.operator is operators.eq
                and isinstance(clause.left, Column)
                and clause.left.table is stmt.table
                and isinstance(clause.right, BindParameter)
            ):
                raise ValueError("not a row found by equal columns")
            self.found.append((clause.left.name, clause.right.key))
        params = {key for _, key in self.found}
        columns = stmt.table.c
        self.set = [k for k in keys if k not in params]
        if not self.set or any(k not in columns for k in self.set) or not params <= set(keys):
            raise ValueError("rows that do not name the columns they set")
        if stmt._values:  # values of the statement's own
            raise ValueError("values of the statement's own")
        self.keys = itemgetter(*[key for _, key in self.found], *self.set)
        # What every UPDATE of the table also sets (a change number worked out in SQL), as
        # SQLAlchemy's own UPDATE sets it.
        self.also: list[tuple[str, str]] = []
        for column in stmt.table.columns:
            if column.onupdate is None or column.key in self.set:
                continue
            default = column.onupdate
            if not (
                isinstance(default, ColumnElementColumnDefault)
                and isinstance(default.arg, ColumnElement)
            ):
                raise ValueError(f"{column.key}: set on update by Python")
            sql = default.arg.compile(dialect=dialect, compile_kwargs={"literal_binds": True})
            self.also.append((column.name, str(sql)))

    def sql(self, count: int) -> str:
        """The UPDATE of `count` rows, each a row of VALUES: its keys, then what it sets."""
        width = len(self.found) + len(self.set)
        marks = "(" + ", ".join("?" * width) + ")"
        n = len(self.found)
        sets = ", ".join(
            [f'"{c}" = v.column{n + i + 1}' for i, c in enumerate(self.set)]
            + [f'"{c}" = ({sql})' for c, sql in self.also]
        )
        where = " AND ".join(
            f'"{self.table}"."{c}" = v.column{i + 1}' for i, (c, _) in enumerate(self.found)
        )
        values = ", ".join([marks] * count)
        return f'UPDATE "{self.table}" SET {sets} FROM (VALUES {values}) AS v WHERE {where}'
