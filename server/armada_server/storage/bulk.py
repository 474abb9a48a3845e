"""Bulk statements without SQLAlchemy's per-row parameter and result handling.

Submissions, scheduling cycles and executor syncs read and write tens of thousands of rows
whose values mostly repeat (one timestamp, one queue, one job set). SQLAlchemy converts every
value of every row in Python on its way to and from the driver (a datetime is formatted or
parsed per value), which was most of the cost of those writes. Here conversions run once per
distinct value and rows go to the driver's cursor as they are: the same statements, the same
stored forms (datetimes on SQLite as UTC text "YYYY-MM-DD HH:MM:SS.ffffff", timezone dropped,
as SQLAlchemy's SQLite DateTime stores them), the same transaction. On PostgreSQL new rows
go in by COPY (psycopg's copy, in the transaction), which took a third of the CPU of the
driver's executemany per row; `fetch` and `execute` hand the driver the SQL and values
SQLAlchemy's execution would send, where that is all it would do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Connection,
    DateTime,
    Insert,
    Select,
    Table,
    TextClause,
    Update,
    select,
)
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.cache_key import CacheKey
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import ReturningInsert
from sqlalchemy.sql.schema import ColumnElementColumnDefault, ScalarElementColumnDefault

from armada_server.storage.sqlite_statements import sqlite_inserts, sqlite_updates

# What `fetch` reads: a select, or an insert RETURNING what it wrote (or SQL as text).
Rows = Select[*tuple[Any, ...]] | ReturningInsert[*tuple[Any, ...]] | TextClause

_DEFAULTS: dict[str, tuple[dict[str, Any], dict[str, ColumnElement[Any]]]] = {}
# Table -> the select of its computed defaults' values, built once: a statement's cache key
# is worked out once per statement object, and a request of one job inserts into two tables.
_COMPUTED: dict[str, Select[Any]] = {}


def _defaults_of(table: Table) -> tuple[dict[str, Any], dict[str, ColumnElement[Any]]]:
    """Every column's value when a row leaves it out, and the columns whose default is an
    SQL expression (evaluated once per insert: the same for every row of a transaction)."""
    found = _DEFAULTS.get(table.name)
    if found is None:
        defaults: dict[str, Any] = {}
        computed: dict[str, ColumnElement[Any]] = {}
        for column in table.columns:
            default = column.default
            if default is None:
                defaults[column.key] = None
            elif isinstance(default, ScalarElementColumnDefault):
                defaults[column.key] = default.arg
            elif isinstance(default, ColumnElementColumnDefault) and isinstance(
                default.arg, ColumnElement
            ):
                computed[column.key] = default.arg
            else:
                raise ValueError(f"{table.name}.{column.key}: a default of an unknown kind")
        if computed:  # before the defaults: a thread that finds them finds this too
            _COMPUTED[table.name] = select(*computed.values())
        found = _DEFAULTS[table.name] = (defaults, computed)
    return found


class _Shape(NamedTuple):
    """What `NewRows` makes every row of a table by (worked out once: a sync or a
    submission of one row made it per call)."""

    defaults: dict[str, Any]
    known: frozenset[str]
    names: tuple[str, ...]
    values: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    dated: tuple[str, ...]  # the times converted for SQLite

    @classmethod
    def of(cls, dialect: str, table: Table, numbered: str | None) -> _Shape:
        defaults, _ = _defaults_of(table)
        names = _names(table, numbered)
        values = itemgetter(*names) if len(names) > 1 else lambda row: (row[names[0]],)
        dated: tuple[str, ...] = ()
        if dialect == "sqlite":
            dated = tuple(n for n in names if isinstance(table.c[n].type, DateTime))
        return cls(defaults, frozenset(table.columns.keys()), names, values, dated)


_SHAPES: dict[tuple[str, str, str | None], _Shape] = {}
_NAMES: dict[tuple[str, str | None], tuple[str, ...]] = {}


def _names(table: Table, numbered: str | None) -> tuple[str, ...]:
    """The columns a table's new rows give, in its order (all but `numbered`)."""
    found = _NAMES.get((table.name, numbered))
    if found is None:
        defaults, _ = _defaults_of(table)
        found = _NAMES[(table.name, numbered)] = tuple(n for n in defaults if n != numbered)
    return found


class NewRows:
    """New rows of one table as the driver takes them, made before their transaction opens
    (on SQLite every other writer waits for that transaction, so what can be built outside
    it is): each row a tuple of the columns the table fills from Python, its defaults filled
    in, times as SQLite stores them there. `insert_new` writes them (`insert_numbered` those
    whose column `numbered` is given in the transaction: a job set's events take their
    numbers there), evaluating the defaults that are SQL expressions once for the rows (the
    same for a transaction's rows).
    A row naming a column the table lacks is refused here, before anything is written."""

    __slots__ = ("names", "numbered", "table", "values")

    def __init__(
        self,
        dialect: str,
        table: Table,
        rows: Sequence[Mapping[str, Any]],
        *,
        numbered: str | None = None,
    ) -> None:
        shape = _SHAPES.get((dialect, table.name, numbered))
        if shape is None:
            shape = _SHAPES[(dialect, table.name, numbered)] = _Shape.of(dialect, table, numbered)
        defaults, known, names, values, dated = shape
        for row in rows:
            if not known.issuperset(row):
                unknown = ", ".join(sorted(set(row) - known))
                raise ValueError(f"{table.name}: no column named {unknown}")
        made: list[tuple[Any, ...]] = []
        for row in rows:
            full = {**defaults, **row}
            for n in dated:
                if full[n] is not None:
                    full[n] = sqlite_value(full[n])
            made.append(values(full))
        self.table, self.names, self.numbered, self.values = table, names, numbered, made

    @classmethod
    def of_values(
        cls,
        table: Table,
        names: tuple[str, ...],
        values: list[tuple[Any, ...]],
        *,
        numbered: str | None = None,
    ) -> NewRows:
        """Rows made by their caller as the driver takes them: tuples of the columns `names`
        (every column the table fills from Python but `numbered`, in the table's order),
        times already as the dialect stores them. For the rows made by the hundred thousand
        (events), where a mapping per row and its conversion cost more than the row."""
        expected = _names(table, numbered)
        if names != expected:
            raise ValueError(f"{table.name}: rows of {names}, where it takes {expected}")
        rows = cls.__new__(cls)
        rows.table, rows.names, rows.numbered, rows.values = table, names, numbered, values
        return rows

    def __len__(self) -> int:
        return len(self.values)


def insert_rows(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """INSERT every row (a mapping of column name to value), all or none."""
    insert_new(conn, NewRows(conn.dialect.name, table, rows))


def insert_new(conn: Connection, rows: NewRows) -> None:
    """INSERT the made rows, all or none (rows to number go in by `insert_numbered`)."""
    if not rows.values:
        return
    if rows.numbered is not None:
        raise ValueError(f"{rows.table.name}: the rows' {rows.numbered} needs numbers")
    _, computed = _defaults_of(rows.table)
    names, values = rows.names, rows.values
    if conn.dialect.name == "postgresql" and len(values) <= FEW_ROWS:
        _insert_few(conn, rows.table, names, values, computed)
        return
    if computed:
        [evaluated] = fetch(conn, _COMPUTED[rows.table.name])
        extra = tuple(evaluated)
        if conn.dialect.name == "sqlite":
            extra = tuple(map(sqlite_value, extra))
        names = (*names, *computed)
        values = [row + extra for row in values]
    if conn.dialect.name == "postgresql":
        _copy(conn, rows.table, names, values)
        return
    for sql, params in sqlite_inserts(conn, rows.table.name, names, values):
        with _on_driver(conn, sql) as cursor:
            cursor.execute(sql, params)


def insert_numbered(conn: Connection, batches: Sequence[tuple[NewRows, int]]) -> None:
    """INSERT the rows of one or more NewRows of one table in one statement, all or none,
    each batch's `numbered` column taking its `first`, then `first` + 1, and so on, in its
    rows' order (job sets' events)."""
    if not batches:
        return
    head = batches[0][0]
    if any(
        (b.table, b.names, b.numbered) != (head.table, head.names, head.numbered)
        for b, _ in batches
    ):
        raise ValueError("insert_numbered: batches of different tables or columns")
    if head.numbered is None:
        raise ValueError(f"{head.table.name}: rows to number need their numbered column")
    joined = NewRows(conn.dialect.name, head.table, [])
    joined.names = (head.numbered, *head.names)
    joined.values = [
        (seq, *row) for rows, first in batches for seq, row in enumerate(rows.values, start=first)
    ]
    insert_new(conn, joined)


# Rows up to this many go in by one INSERT on PostgreSQL, more by COPY. A COPY is two round
# trips, and the computed columns' values (`_defaults_of`) a third before it; an INSERT
# computes them in its own statement. A request of one job writes two tables.
FEW_ROWS = 16
# (table, its columns, how many rows) -> the INSERT of them on PostgreSQL.
_FEW_SQL: dict[tuple[str, tuple[str, ...], int], str] = {}


def _insert_few(
    conn: Connection,
    table: Table,
    names: tuple[str, ...],
    rows: Sequence[Sequence[Any]],
    computed: Mapping[str, ColumnElement[Any]],
) -> None:
    """INSERT a few rows in one statement on PostgreSQL, the computed columns evaluated in
    it."""
    key = (table.name, names, len(rows))
    sql = _FEW_SQL.get(key)
    if sql is None:
        expressions = [
            str(e.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
            for e in computed.values()
        ]
        columns = ", ".join(f'"{n}"' for n in (*names, *computed))
        row = "(" + ", ".join(["%s"] * len(names) + expressions) + ")"
        sql = _FEW_SQL[key] = f'INSERT INTO "{table.name}" ({columns}) VALUES ' + ", ".join(
            [row] * len(rows)
        )
    with _on_driver(conn, sql) as cursor:
        cursor.execute(sql, [value for row in rows for value in row])


def _copy(
    conn: Connection, table: Table, names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """COPY the rows (values of the columns `names`, in order) into `table` on PostgreSQL.
    The driver's errors come back as SQLAlchemy's (`_on_driver`)."""
    columns = ", ".join(f'"{n}"' for n in names)
    sql = f'COPY "{table.name}" ({columns}) FROM STDIN'
    with _on_driver(conn, sql) as cursor, cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row(row)


@contextmanager
def _on_driver(conn: Connection, sql: str) -> Iterator[DBAPICursor]:
    """A cursor of the driver's connection under `conn` (in its transaction) to run `sql`,
    closed after it. The driver's errors come back as SQLAlchemy raises them for its own
    statements, which is what callers handle (a retry on IntegrityError or a deadlock,
    INVALID_ARGUMENT on DataError)."""
    driver = conn.dialect.loaded_dbapi
    cursor = _cursor(conn)
    try:
        yield cursor
    except driver.Error as e:
        # A lost connection is not given back to the pool, as SQLAlchemy's execution does.
        lost = conn.dialect.is_disconnect(e, conn.connection.dbapi_connection, cursor)
        if lost:
            conn.invalidate(e)
        raise DBAPIError.instance(
            sql, None, e, driver.Error, connection_invalidated=lost, dialect=conn.dialect
        ) from None
    finally:
        cursor.close()


# (statement's id, its rows' keys) -> its SQL, its parameters' names, the dated ones.
_COMPILED: dict[tuple[int, tuple[str, ...]], tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
_FORMATTED: dict[datetime, str] = {}
# Enough for a sync's slice of reports, each with its own time, which the job's, the run's
# and the event's rows each hold, written table by table: with 4,096 kept, each time was
# formatted again for every table (a sync reporting 80,000 running spent 0.3 s more).
_FORMATTED_KEPT = 1 << 16


def fetch(
    conn: Connection, stmt: Rows, params: Mapping[str, Any] | None = None
) -> Sequence[Sequence[Any]]:
    """The rows of a select (or a statement RETURNING rows), given the values of its named
    parameters if it has any, as plain tuples, straight from the driver (on SQLite times
    come back as text: read them with rows.when)."""
    if conn.dialect.name != "sqlite":
        plain = _postgresql_statement(conn, stmt, params)
        if plain is None:
            return [tuple(r) for r in conn.execute(stmt, params)]
        with _on_driver(conn, plain[0]) as cursor:
            cursor.execute(*plain)
            return cursor.fetchall()
    sql, args = _sqlite_select(conn, stmt, params)
    with _on_driver(conn, sql) as cursor:
        cursor.execute(sql, args)
        return cursor.fetchall()


def placeholder(dialect: str) -> str:
    """How the driver marks a positional parameter in `fetch_sql`'s SQL."""
    return "?" if dialect == "sqlite" else "%s"


def fetch_sql(conn: Connection, sql: str, args: Sequence[Any]) -> Sequence[Sequence[Any]]:
    """The rows of SQL written for the driver (`placeholder` marks its parameters), given
    their values in order, on the driver's cursor: for statements whose size varies, which
    SQLAlchemy would build and compile for each size."""
    if conn.dialect.name == "sqlite":
        args = [sqlite_value(a) for a in args]
    with _on_driver(conn, sql) as cursor:
        cursor.execute(sql, args)
        return cursor.fetchall()


def execute_sql(conn: Connection, sql: str, args: Sequence[Any]) -> None:
    """SQL written for the driver that returns no rows, as `fetch_sql` runs a select."""
    if conn.dialect.name == "sqlite":
        args = [sqlite_value(a) for a in args]
    with _on_driver(conn, sql) as cursor:
        cursor.execute(sql, args)


def execute(
    conn: Connection, stmt: Update | TextClause, params: Mapping[str, Any] | None = None
) -> int:
    """A statement that returns no rows (a small UPDATE), run as `fetch` runs a select: on
    SQLite straight on the driver's cursor, which costs a fifth of SQLAlchemy's execution for
    the statements every submission runs. Returns the rows it matched."""
    if conn.dialect.name != "sqlite":
        plain = _postgresql_statement(conn, stmt, params)
        if plain is None:
            return int(conn.execute(stmt, params).rowcount)
        with _on_driver(conn, plain[0]) as cursor:
            cursor.execute(*plain)
            return int(cursor.rowcount)
    sql, args = _sqlite_select(conn, stmt, params)
    with _on_driver(conn, sql) as cursor:
        cursor.execute(sql, args)
        return int(cursor.rowcount)


# A select's structure (SQLAlchemy's cache key, which leaves out its values) -> its compiled
# form on SQLite (None for one with values rendered into its SQL). Compiling took four times
# as long as finding the key and the values; the selects hot paths run are built per call,
# with other ids each time but few shapes.
_SELECTS: dict[Any, SQLCompiler | None] = {}
_SELECTS_KEPT = 1024


# The same on PostgreSQL, None for a statement SQLAlchemy runs itself (`_on_driver_alike`).
_POSTGRESQL: dict[Any, SQLCompiler | None] = {}


def _compiled_once(
    conn: Connection,
    stmt: Rows | Update | TextClause,
    key: CacheKey,
    kept: dict[Any, SQLCompiler | None],
    usable: Callable[[SQLCompiler], bool],
) -> SQLCompiler | None:
    """`stmt` compiled for `conn`'s dialect once per structure (its cache `key`) in `kept`;
    None, also kept, for a structure `usable` refuses."""
    try:
        return kept[key.key]
    except KeyError:
        pass
    fresh = stmt.compile(dialect=conn.dialect, cache_key=key)
    assert isinstance(fresh, SQLCompiler)
    compiled = fresh if usable(fresh) else None
    if len(kept) >= _SELECTS_KEPT:
        kept.clear()
    kept[key.key] = compiled
    return compiled


def _no_values_in_sql(compiled: SQLCompiler) -> bool:
    return not compiled.literal_execute_params


def _postgresql_statement(
    conn: Connection, stmt: Rows | Update | TextClause, params: Mapping[str, Any] | None
) -> tuple[str, MutableMapping[str, Any]] | None:
    """The SQL and named arguments of a statement on PostgreSQL's driver, as SQLAlchemy's
    execution would send them: its execution cost about 70 us of CPU a statement, twice the
    driver's. None where that execution does more than send them (`_on_driver_alike`), or
    for an empty list or one of tuples, which SQLAlchemy spells its own ways."""
    key = stmt._generate_cache_key()
    if key is None:
        return None
    compiled = _compiled_once(conn, stmt, key, _POSTGRESQL, _on_driver_alike)
    if compiled is None:
        return None
    values = compiled.construct_params(params, extracted_parameters=key.bindparams)
    for name, process in compiled._bind_processors.items():
        if name in values:
            if not callable(process):  # a tuple's, per element
                return None
            values[name] = process(values[name])
    sql = compiled.string
    for bind in compiled.post_compile_params:  # lists: one parameter for each value
        name = compiled.bind_names[bind]
        listed = values.pop(name)
        if not listed or isinstance(listed[0], tuple):
            return None  # SQLAlchemy's own forms for these
        names = [f"{name}__{i}" for i in range(len(listed))]
        values.update(zip(names, listed, strict=True))
        marks = ", ".join(f"%({n})s" for n in names)
        sql = sql.replace(f"__[POSTCOMPILE_{name}]", marks, 1)
    return sql, values


def _on_driver_alike(compiled: SQLCompiler) -> bool:
    """Whether the driver given the compiled SQL and its values (bind processors applied,
    lists expanded by `_postgresql_statement`) returns what SQLAlchemy's execution returns:
    no values put into the SQL, no names escaped, no list whose values SQLAlchemy converts,
    and no column whose values SQLAlchemy converts on the way out."""
    if compiled.positional or compiled.literal_execute_params or compiled.escaped_bind_names:
        return False
    for bind in compiled.post_compile_params:
        if not bind.expanding or compiled.bind_names[bind] in compiled._bind_processors:
            return False
    for column in compiled._result_columns:
        try:
            if column.type._cached_result_processor(compiled.dialect, None) is not None:
                return False
        except TypeError:  # one that needs the driver's type of the column (numerics)
            return False
    return True


def _sqlite_select(
    conn: Connection, stmt: Rows | Update, params: Mapping[str, Any] | None
) -> tuple[str, list[Any]]:
    """The SQL and positional arguments of a statement on SQLite, its lists of values
    expanded into one placeholder each (what `render_postcompile` does, without compiling
    again)."""
    key = stmt._generate_cache_key()
    if key is None:
        return _rendered(conn, stmt, params)
    compiled = _compiled_once(conn, stmt, key, _SELECTS, _no_values_in_sql)
    if compiled is None:
        return _rendered(conn, stmt, params)  # values rendered into the SQL
    values = compiled.construct_params(params, extracted_parameters=key.bindparams)
    sql = compiled.string
    args: list[Any] = []
    for name in compiled.positiontup or ():
        value = values[name]
        if not compiled.binds[name].expanding:
            args.append(sqlite_value(value))
            continue
        if not value or isinstance(value[0], tuple):
            return _rendered(conn, stmt, params)  # SQLAlchemy's own forms for these
        args += [sqlite_value(v) for v in value]
        marks = ", ".join("?" * len(value))
        sql = sql.replace(f"__[POSTCOMPILE_{name}]", marks, 1)
    return sql, args


def _rendered(
    conn: Connection, stmt: Rows | Update, params: Mapping[str, Any] | None
) -> tuple[str, list[Any]]:
    """The statement compiled with its values in place (lists expanded by SQLAlchemy)."""
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    values = compiled.construct_params(params)
    return compiled.string, [sqlite_value(values[n]) for n in _positions(compiled)]


def sqlite_value(value: object) -> object:
    """A parameter as SQLAlchemy's SQLite dialect would send it."""
    if isinstance(value, datetime) and value.tzinfo is UTC:
        text = _FORMATTED.get(value)
        if text is None:
            if len(_FORMATTED) >= _FORMATTED_KEPT:
                _FORMATTED.clear()
            text = _FORMATTED[value] = value.isoformat(" ", "microseconds")[:26]
        return text
    if isinstance(value, datetime):
        return value.isoformat(" ", "microseconds")[:26]
    return value


# Updates are written in the order of the key that finds their rows: the B-tree pages are
# then visited in order, not at random (80,000 jobs of random ids took SQLite four times as
# long out of order), and on PostgreSQL every writer takes its rows' locks in one order.
_IN_ORDER = "_id"


def executemany(conn: Connection, stmt: Insert | Update, rows: Sequence[dict[str, Any]]) -> int:
    """`conn.execute(stmt, rows)` for an UPDATE or INSERT that is a module constant (its
    compiled form is cached per statement and set of keys); returns the rows it matched
    (the transition guard compares them with the rows it meant to change). The rows are the
    caller's throwaway dicts: on SQLite their times are replaced by text. Rows with an
    `_id` go in its order (_IN_ORDER)."""
    if not rows:
        return 0
    if _IN_ORDER in rows[0]:
        rows = sorted(rows, key=itemgetter(_IN_ORDER))
    if conn.dialect.name != "sqlite":
        return conn.execute(stmt, rows).rowcount
    keys = tuple(rows[0])
    found = _COMPILED.get((id(stmt), keys))
    if found is None:
        compiled = stmt.compile(dialect=conn.dialect, column_keys=list(keys))
        names = tuple(_positions(compiled))
        columns = stmt.table.c
        dated = tuple(n for n in names if n in columns and isinstance(columns[n].type, DateTime))
        found = _COMPILED[(id(stmt), keys)] = (compiled.string, names, dated)
    sql, names, dated = found
    for r in rows:
        for n in dated:
            if r[n] is not None:
                r[n] = sqlite_value(r[n])
    if len(rows) > 1 and isinstance(stmt, Update):
        statements = sqlite_updates(conn, stmt, keys, rows)
        if statements is not None:
            matched = 0
            for sql, params in statements:
                with _on_driver(conn, sql) as cursor:
                    cursor.execute(sql, params)
                    matched += int(cursor.rowcount)
            return matched
    if len(names) == 1:
        params = [(r[names[0]],) for r in rows]
    else:
        values = itemgetter(*names)
        params = [values(r) for r in rows]
    with _on_driver(conn, sql) as cursor:
        cursor.executemany(sql, params)
        return int(cursor.rowcount)


def _cursor(conn: Connection) -> DBAPICursor:
    """A cursor of the driver's connection under `conn` (in its transaction)."""
    driver = conn.connection.dbapi_connection
    assert driver is not None  # a connection in use holds its driver's connection
    return driver.cursor()


def _positions(compiled: object) -> list[str]:
    """The names of a compiled statement's positional parameters, in order."""
    assert isinstance(compiled, SQLCompiler)
    return list(compiled.positiontup or ())
