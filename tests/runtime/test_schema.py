"""runtime/sql/schema/ holds the current text of every database function and trigger, and
a freshly migrated database (pytest-django's test database) defines exactly those.

A function is defined by a migration, perhaps redefined by later ones (steward_submit by
five between 0003 and 0007): the migrations say what ran when, this folder says what
runs now. One file per function, named after it: the function as pg_get_functiondef()
gives it, then each trigger that executes it as pg_get_triggerdef() gives it, each
statement ended by `;` (the only change to PostgreSQL's text). Both directions are held:
no function or trigger the database has is missing here, and nothing here is missing
from the database.

A migration that adds, changes or drops a function or a trigger changes its file in the
same commit. To write the files from the migrated test database:

    STEWARD_SCHEMA_WRITE=1 .venv/bin/python -m pytest tests/runtime/test_schema.py

then read the diff: it is the change the migration makes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.db import connection

# pytest-django sets up the test database only for the databases some collected test marks;
# these read it through module fixtures, so they mark it themselves (run alone, they found none).
pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "runtime" / "sql" / "schema"
WRITE = os.environ.get("STEWARD_SCHEMA_WRITE") == "1"
HOW = (
    "runtime/sql/schema/ must hold the migrated database's functions and triggers: a migration that changes "
    "one changes its file in the same commit (STEWARD_SCHEMA_WRITE=1 pytest tests/runtime/test_schema.py "
    "writes them; see that module's docstring)"
)

# Every function of the application's schema (none an extension's), and every trigger
# on its tables that PostgreSQL did not make itself (foreign keys' are internal) but a partition's.
FUNCTIONS = """
SELECT p.proname, pg_get_functiondef(p.oid)
FROM pg_proc p
WHERE p.pronamespace = current_schema()::regnamespace
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                                              AND d.deptype = 'e')
ORDER BY p.proname
"""
TRIGGERS = """
SELECT f.proname, pg_get_triggerdef(t.oid)
FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_proc f ON f.oid = t.tgfoid
WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
  -- A partition's triggers (its clones of its parent's, its own TRUNCATE guard) are made with
  -- it, by the functions here (steward_partitions_ensure, migration 0032): not listed per partition.
  AND NOT c.relispartition
ORDER BY f.proname, c.relname, t.tgname
"""


def migrated() -> dict[str, str]:
    """What each file should hold, by file name, read off the migrated database."""
    with connection.cursor() as cur:
        cur.execute(FUNCTIONS)
        texts = {name: [definition.rstrip("\n") + ";"] for name, definition in cur.fetchall()}
        cur.execute(TRIGGERS)
        for function, definition in cur.fetchall():
            texts[function].append(definition + ";")
    return {f"{name}.sql": "\n\n".join(parts) + "\n" for name, parts in texts.items()}


def on_disk() -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(SCHEMA.glob("*.sql"))}


@pytest.fixture(scope="module")
def expected(django_db_setup, django_db_blocker) -> dict[str, str]:
    with django_db_blocker.unblock():
        found = migrated()
    if WRITE:
        for stale in set(on_disk()) - set(found):
            (SCHEMA / stale).unlink()
        for name, text in found.items():
            (SCHEMA / name).write_text(text)
    return found


def test_the_database_has_a_function_and_a_trigger_to_hold(expected):
    """The catalogue queries find something: an empty answer would pass every test below."""
    assert (
        "steward_submit.sql" in expected and "CREATE TRIGGER steward_audit_link" in expected["steward_audit_link.sql"]
    )


def test_every_function_and_trigger_of_the_migrated_database_has_its_file(expected):
    assert sorted(set(expected) - set(on_disk())) == [], HOW


def test_every_file_names_a_function_the_migrated_database_has(expected):
    assert sorted(set(on_disk()) - set(expected)) == [], HOW


@pytest.mark.parametrize("name", sorted(p.name for p in SCHEMA.glob("*.sql")))
def test_each_file_is_the_migrated_databases_text(expected, name):
    assert on_disk()[name] == expected.get(name), f"{name}: {HOW}"


def test_each_trigger_is_in_its_functions_file(expected):
    """A trigger appears once, after the function it executes."""
    triggers = [line for text in expected.values() for line in text.split("\n\n") if line.startswith("CREATE TRIGGER")]
    assert len(triggers) == len(set(triggers)) >= 20
