"""Every statement's result is read by name (runtime/db.py): each statement in runtime/sql/
has a reader, a frozen dataclass declared with @db.reads, whose fields are the columns
PostgreSQL says the statement returns; and no code reads a row by position.

The columns come from describing each statement, prepared (never run) on the migrated
test database: what psycopg's cursor.description would say after running it.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
import re
from importlib import resources
from pathlib import Path

import psycopg._queries
import pytest
from django.db import connection
from psycopg.adapt import Transformer

import runtime
from runtime import db

# pytest-django sets up the test database only for the databases some collected test marks;
# these read it through module fixtures, so they mark it themselves (run alone, they found none).
pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
NAMES = sorted(p.name[:-4] for p in resources.files("runtime.sql").iterdir() if p.name.endswith(".sql"))

# Statements whose rows are their locks or notifications, never read: each is only ever
# run for what it does (`db.execute(...)` or `db.fetchall(...)` as a statement of its own).
UNREAD = {
    "agent_code",  # set_config: marks the connection as running agent code
    "agent_switch_lock",
    "audit_once_lock",
    "lock_task",
    "spawn_lock",
    "stop_notify",
    "stop_pools_lock",
    "tree_lock",
    "version_lock",
}
# Files that read a cursor of their own, not a statement of runtime/sql/: runtime/roles.py
# runs catalog queries on Django's cursor while migrate grants the roles; runtime/testing.py
# reads the test clock's own schema (test databases only) on the connection it is given.
# runtime/lifecycle/statements.py builds its statements from the payload registry (no
# file of runtime/sql/ names them): it runs them and returns typed values itself.
OWN_CURSORS = {"runtime/roles.py", "runtime/testing.py", "runtime/lifecycle/statements.py"}


def _import_runtime() -> None:
    """Import every runtime module, so that every reader has been declared."""
    for info in pkgutil.walk_packages(runtime.__path__, "runtime."):
        if ".migrations" not in info.name:
            importlib.import_module(info.name)


def describe(name: str) -> list[str]:
    """The columns statement `name` returns, from PostgreSQL's description of it prepared
    (the unnamed statement: nothing is run, nothing is kept)."""
    connection.ensure_connection()
    raw = connection.connection
    text = db.sql(name)
    query = psycopg._queries.PostgresQuery(Transformer(raw))
    query.convert(text, {key: None for key in re.findall(r"%\((\w+)\)s", text)})
    prepared = raw.pgconn.prepare(b"", query.query)
    assert prepared.status == psycopg.pq.ExecStatus.COMMAND_OK, prepared.get_error_message()
    described = raw.pgconn.describe_prepared(b"")
    return [described.fname(i).decode() for i in range(described.nfields)]


@pytest.fixture(scope="module")
def columns(django_db_setup, django_db_blocker) -> dict[str, list[str]]:
    _import_runtime()
    with django_db_blocker.unblock():
        return {name: describe(name) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_a_statements_readers_take_exactly_its_columns(name, columns):
    """A plain reader's fields are the statement's columns in their order; a reader with a
    model field takes, besides its own, every column of that model's table."""
    got = columns[name]
    assert len(set(got)) == len(got), f"{name}.sql returns a column name twice: {got}"
    for reader in db.READERS.get(name, []):
        takes = db.reader_columns(reader)
        expected = sorted(takes) if any(takes.values()) else list(takes)
        assert (sorted(got) if any(takes.values()) else got) == expected, (
            f"{name}.sql returns {got}; its reader {reader.__qualname__} takes {list(takes)}"
        )


def test_every_statement_with_a_result_has_a_reader(columns):
    unread = {name for name, got in columns.items() if got and name not in db.READERS}
    assert unread == UNREAD, "a statement whose rows are read needs a reader (@db.reads)"
    assert not any(columns[name] == [] for name in db.READERS), "a reader of a statement that returns nothing"


def test_every_reader_is_a_frozen_dataclass_of_known_statements():
    _import_runtime()
    for name, readers in db.READERS.items():
        assert name in NAMES, f"@db.reads({name!r}): there is no runtime/sql/{name}.sql"
        for reader in readers:
            assert dataclasses.is_dataclass(reader) and reader.__dataclass_params__.frozen, reader


# --- the code: nothing reads a row by position ----------------------------------------------


def _sources() -> list[Path]:
    return [p for p in sorted(REPO.glob("runtime/**/*.py")) if "migrations" not in p.parts and p.name != "db.py"]


def _calls(tree: ast.AST):
    """(call, whether its value is used) for every call in the tree."""
    discarded = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            yield node, id(node) not in discarded


def _is_db(node: ast.Call, *names: str) -> bool:
    return isinstance(node.func.value, ast.Name) and node.func.value.id == "db" and node.func.attr in names


def _statement(node: ast.Call) -> str | None:
    first = node.args[0] if node.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_code_reads_a_statements_row_by_position(path):
    """A fetch whose rows are used names its reader; no cursor is read, described or given
    a statement of its own outside db.py; an unread statement is run only for its effect."""
    rel = str(path.relative_to(REPO))
    found = []
    for call, used in _calls(ast.parse(path.read_text())):
        line = f"{rel}:{call.lineno}"
        if _is_db(call, "fetchone", "fetchall") and used and not any(k.arg == "row" for k in call.keywords):
            found.append(f"{line}: db.{call.func.attr}({_statement(call)!r}) without row=")
        elif _is_db(call, "execute", "fetchone", "fetchrow", "fetchall") and _statement(call) in UNREAD and used:
            found.append(f"{line}: the rows of {_statement(call)}.sql are read")
        elif call.func.attr in ("fetchone", "fetchall", "fetchmany") and not _is_db(call, "fetchone", "fetchall"):
            if rel not in OWN_CURSORS:
                found.append(f"{line}: .{call.func.attr}() on a cursor: use db.fetchone/fetchall/rows with row=")
        elif (
            call.func.attr == "execute" and isinstance(call.func.value, ast.Call) and _is_db(call.func.value, "cursor")
        ):
            found.append(f"{line}: db.cursor().execute(...): a statement belongs in runtime/sql/")
    for node in ast.walk(ast.parse(path.read_text())):
        cursor = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and "cur" in node.value.id
        if cursor and node.attr == "description" and rel not in OWN_CURSORS:
            found.append(f"{rel}:{node.lineno}: .description: read columns by name through a reader")
    assert found == []
