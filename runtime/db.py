"""Hand-written SQL for the hot paths, run on Django's own connection.

Django's psycopg backend binds parameters client-side and disables prepared
statements (so that it works behind PgBouncer). The journal write runs thousands of
times per task, so these statements use a server-binding psycopg cursor on the same
connection and ask for a prepared statement: PostgreSQL then skips parse and plan on
every call (docs/adr/0003-hot-path-sql.md). They share Django's transaction: inside
`transaction.atomic()` they commit with it; outside it they autocommit.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import psycopg
from django.db import connection


@cache
def sql(name: str) -> str:
    """The text of runtime/sql/<name>.sql, loaded once per process."""
    return resources.files("runtime.sql").joinpath(f"{name}.sql").read_text()


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
