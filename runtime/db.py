"""Hand-written SQL for the hot paths, run on Django's own connection.

Django's psycopg backend binds parameters client-side and disables prepared
statements (so that it works behind PgBouncer). The journal write runs thousands of
times per task, so these statements use a server-binding psycopg cursor on the same
connection and ask for a prepared statement: PostgreSQL then skips parse and plan on
every call (docs/adr/0003-hot-path-sql.md). They share Django's transaction: inside
`transaction.atomic()` they commit with it; outside it they autocommit.

A statement's result is read by name, never by position: each has a reader, a frozen
dataclass declared with `@reads("<statement>")` beside the code that calls it, and
fetchone/fetchall(..., row=Reader) build one per row from the columns the statement
names. A column added, dropped or renamed without its reader fails at once, instead of
shifting what row[3] means; tests/runtime/test_sql_rows.py holds every statement's
columns, as PostgreSQL describes them, to its reader's fields.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Callable, Hashable, Sequence
from functools import cache
from importlib import resources
from typing import Any, TypeVar, overload

import django.db
import psycopg
import psycopg._queries
from django.db import connection, models, transaction

# What a lost or refused database connection raises: Django's wrappers for the ORM's
# statements, psycopg's own for the runtime's (cursor() below bypasses Django's error
# wrapping). This covers a terminated backend (AdminShutdown), a restart, a dropped
# socket, and the server-side timeouts of docs/adr/0012-bounded-stale-owners.md
# (QueryCanceled, IdleInTransactionSessionTimeout). None of them is an agent's error.
CONNECTION_ERRORS = (
    django.db.OperationalError,
    django.db.InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)


# psycopg turns a statement's `%(name)s` placeholders into `$n` by scanning its whole text,
# and keeps the result only for statements of up to 4 kB (MAX_CACHED_STATEMENT_LENGTH:
# against ORM-made statements that seldom repeat). Ours are a fixed set that repeat for
# the life of the process, and the gateway's admission (12 kB, comments included) was
# scanned again on every call: 0.6 ms of a 2 ms admission (tests/bench_budgets.py,
# profiled). The bound covers every statement in runtime/sql/ (tests/runtime/test_db_sql.py).
SQL_CACHE_BYTES = 32 * 1024
psycopg._queries.MAX_CACHED_STATEMENT_LENGTH = max(psycopg._queries.MAX_CACHED_STATEMENT_LENGTH, SQL_CACHE_BYTES)

EXTENDS = "-- extends: "
RESULT = "\n-- result:"


@cache
def sql(name: str) -> str:
    """The text of runtime/sql/<name>.sql, loaded once per process.

    A file whose first line is `-- extends: <base>` continues <base>'s statement: the
    text is <base>'s up to its `-- result:` line (its WITH clause and CTEs), then this
    file's (more CTEs, each starting with a comma, and its own result). One statement
    then does both, in one round trip and one snapshot, with neither written twice."""
    text = resources.files("runtime.sql").joinpath(f"{name}.sql").read_text()
    first, _, rest = text.partition("\n")
    if not first.startswith(EXTENDS):
        return text
    base = sql(first[len(EXTENDS) :].strip())
    head, marker, _ = base.rpartition(RESULT)
    if not marker:
        raise ValueError(f"{name}.sql extends {first[len(EXTENDS) :].strip()}.sql, which marks no `-- result:`")
    return head + "\n" + rest


def cursor() -> psycopg.Cursor:
    """A server-binding cursor on Django's current connection, made once per connection:
    building one costs about as much as a step's Python side (tests/bench.py)."""
    connection.ensure_connection()
    raw = connection.connection
    cur = getattr(raw, "_steward_cursor", None)
    if cur is None:
        cur = raw._steward_cursor = psycopg.Cursor(raw)
    return cur


def execute(name: str, params: dict | tuple = (), *, prepare: bool = True) -> psycopg.Cursor:
    cur = cursor()
    cur.execute(sql(name), params, prepare=prepare)
    return cur


R = TypeVar("R")

# statement name -> the readers declared for its rows (@reads); the test walks it.
READERS: dict[str, list[type]] = {}


def reads(*statements: str) -> Callable[[type[R]], type[R]]:
    """Declare a frozen dataclass the reader of `statements`' rows: each field takes the
    column of its name, and a field whose type is a model takes that model's columns
    (for a statement that returns a table's rows, `RETURNING a.*`), built as the ORM
    would have loaded them. fetchone/fetchall refuse a reader not declared for the
    statement they run."""

    def declare(cls: type[R]) -> type[R]:
        params = getattr(cls, "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise TypeError(f"{cls.__qualname__}: a statement's reader is a frozen dataclass")
        reader: Any = cls  # a class attribute of our own, which type[R] does not declare
        reader.__reads__ = frozenset(statements) | getattr(cls, "__reads__", frozenset())
        for name in statements:
            READERS.setdefault(name, []).append(cls)
        return cls

    return declare


@overload
def fetchone(name: str, params: dict | tuple = (), *, row: type[R]) -> R | None: ...
@overload
def fetchone(name: str, params: dict | tuple = (), *, row: None = None) -> Any: ...
def fetchone(name: str, params: dict | tuple = (), *, row=None):
    """The statement's first row, as a `row` (None when it returned none)."""
    cur = execute(name, params)
    values = cur.fetchone()
    if row is None or values is None:
        return values  # without `row`: a caller not yet reading by name (the test lists them)
    return _maker(cur, name, row)(values)


def fetchrow(name: str, params: dict | tuple = (), *, row: type[R]) -> R:
    """The one row of a statement that always returns one (an aggregate, an upsert's
    RETURNING, a function call) as a `row`. None would be a broken statement, not an
    answer: it raises rather than hand the caller a None to trip over later."""
    found = fetchone(name, params, row=row)
    if found is None:
        raise LookupError(f"{name}.sql returned no row")
    return found


@overload
def fetchall(name: str, params: dict | tuple = (), *, row: type[R], prepare: bool = True) -> list[R]: ...
@overload
def fetchall(name: str, params: dict | tuple = (), *, row: None = None, prepare: bool = True) -> Any: ...
def fetchall(name: str, params: dict | tuple = (), *, row=None, prepare: bool = True):
    """Every row the statement returned, each as a `row`."""
    cur = execute(name, params, prepare=prepare)
    if row is None:
        return cur.fetchall()
    return rows(cur, name, row)


def rows(cur: psycopg.Cursor, name: str, row: type[R]) -> list[R]:
    """The rows of statement `name` that `cur` just ran, each as a `row`: for a statement
    run on a connection of the caller's own (the stop watch's listener)."""
    make = _maker(cur, name, row)
    return [make(values) for values in cur.fetchall()]


def _maker(cur: psycopg.Cursor, name: str, row: type[R]) -> Callable[[Sequence], R]:
    if name not in getattr(row, "__reads__", ()):
        raise TypeError(f"{row.__qualname__} is not declared a reader of {name}.sql (@db.reads)")
    result = cur.pgresult
    if result is None:
        raise TypeError(f"{name}.sql: the cursor holds no result to read")
    columns = tuple(bytes(result.fname(i) or b"").decode() for i in range(result.nfields))
    plan: Callable[[Sequence], R] = _plan(typing.cast(Hashable, row), columns)  # a class hashes by identity
    return plan


@cache
def _plan(row: type, columns: tuple[str, ...]) -> Callable[[Sequence], Any]:
    """How to build a `row` from values in `columns`' order: each plain field takes its
    column's value, each model field the values of its model's columns. Made once per
    reader and column list; a column that no field takes, or a field no column feeds,
    raises here rather than read a wrong value."""
    takes = reader_columns(row)
    if sorted(columns) != sorted(takes):
        raise TypeError(
            f"{row.__qualname__} reads {', '.join(takes)}; the statement returns {', '.join(columns)}"
            " (a column added or renamed needs its reader changed with it)"
        )
    plain = [(field, columns.index(field)) for field, target in takes.items() if target is None]
    by_model: dict[str, list[tuple[str, int]]] = {}
    for column, target in takes.items():
        if target is not None:
            by_model.setdefault(target, []).append((column, columns.index(column)))
    hints = typing.get_type_hints(row)
    models_of: dict[str, tuple[type[models.Model], bool, list[tuple[str, int]]]] = {}
    for field, cols in by_model.items():
        model, optional = _model_of(hints[field])
        assert model is not None  # reader_columns() sent these columns to a model field
        models_of[field] = (model, optional, cols)

    def make(values: Sequence) -> Any:
        kwargs = {field: values[i] for field, i in plain}
        for field, (model, optional, cols) in models_of.items():
            found = {column: values[i] for column, i in cols}
            # `Model | None`: a row of an outer join that found none (every column NULL).
            none = optional and all(value is None for value in found.values())
            kwargs[field] = None if none else model_from(model, found)
        return row(**kwargs)

    return make


def reader_columns(row: type) -> dict[str, str | None]:
    """The columns a reader takes, in its fields' order: column -> None for a plain field
    (named as its column), or -> the field whose model takes the column."""
    hints = typing.get_type_hints(row)
    takes: dict[str, str | None] = {}
    for field in dataclasses.fields(row):
        model, _ = _model_of(hints[field.name])
        if model is not None:
            for model_field in model._meta.concrete_fields:
                if model_field.column in takes:
                    raise TypeError(f"{row.__qualname__}: column {model_field.column} is read twice")
                takes[model_field.column] = field.name
        elif field.name in takes:
            raise TypeError(f"{row.__qualname__}: column {field.name} is read twice")
        else:
            takes[field.name] = None
    return takes


def _model_of(hint) -> tuple[type[models.Model] | None, bool]:
    """The model a field's type names (`Model` or `Model | None`), and whether it may be None."""
    args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    found = [a for a in args if isinstance(a, type) and issubclass(a, models.Model)]
    return (found[0] if found else None), type(None) in args


def model_from(model: type[models.Model], values: dict[str, Any]) -> Any:
    """An instance of `model` from a statement's values by column, as the ORM would have
    loaded it (Model.from_db): each value through its field's converters (this
    connection hands jsonb over as text), a column not given deferred."""
    fields = model._meta.concrete_fields
    loaded = []
    for field in fields:
        if field.column not in values:
            loaded.append(models.DEFERRED)
            continue
        value = values[field.column]
        if value is not None and not (isinstance(field, models.JSONField) and not isinstance(value, str)):
            for convert in field.get_db_converters(connection):
                value = convert(value, None, connection)
        loaded.append(value)
    return model.from_db(connection.alias, [f.attname for f in fields], loaded)


_IDLE = psycopg.pq.TransactionStatus.IDLE.value  # compared with libpq's own int: no Python objects made


def after_commit(cur: psycopg.Cursor, fn) -> None:
    """Run `fn` once what `cur` just wrote is committed: at once in autocommit, else when
    the surrounding transaction commits. For the hot paths, which have just run a
    statement on `cur`: psycopg's own transaction status answers without the
    thread-local lookups of Django's connection that transaction.on_commit() pays."""
    if cur.connection.pgconn.transaction_status == _IDLE:
        fn()
    else:
        transaction.on_commit(fn)


def discard_connection() -> None:
    """Drop this thread's connection after a connection error, so the next statement
    takes a fresh one. Closing hands it back to the pool, which throws away a broken
    connection instead of keeping it (and checks idle ones before lending them out,
    CONN_HEALTH_CHECKS)."""
    try:
        connection.close()
    except django.db.Error:
        pass  # closing a dead connection can fail too; it is gone either way


@reads("clock")
@dataclasses.dataclass(frozen=True, slots=True)
class Clock:
    now: float  # the database's now(), in seconds since the epoch
    later: float  # now plus the statement's %(seconds)s


def clock() -> datetime.datetime:
    """The database's clock (clock.sql), the one every stored time comes from, as an
    aware UTC datetime: for comparing with stored times and computing the next ones."""
    return datetime.datetime.fromtimestamp(fetchrow("clock", {"seconds": 0}, row=Clock).now, tz=datetime.UTC)
