"""Hand-written SQL for the hot paths, run on Django's own connection.

Django's psycopg backend binds parameters client-side and disables prepared
statements (so that it works behind PgBouncer). The journal write runs thousands of
times per task, so these statements use a server-binding psycopg cursor on the same
connection and ask for a prepared statement: PostgreSQL then skips parse and plan on
every call (docs/adr/0003-hot-path-sql.md). They share Django's transaction: inside
`transaction.atomic()` they commit with it; outside it they autocommit.
"""

from __future__ import annotations

import datetime
from functools import cache
from importlib import resources

import django.db
import psycopg
import psycopg._queries
from django.db import connection, transaction

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


def fetchone(name: str, params: dict | tuple = ()):
    return execute(name, params).fetchone()


def fetchall(name: str, params: dict | tuple = ()):
    return execute(name, params).fetchall()


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


def clock() -> datetime.datetime:
    """The database's clock (clock.sql), the one every stored time comes from, as an
    aware UTC datetime: for comparing with stored times and computing the next ones."""
    return datetime.datetime.fromtimestamp(fetchone("clock", {"seconds": 0})[0], tz=datetime.UTC)
