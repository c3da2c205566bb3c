"""Emptying the test database after a test that committed, by undoing only what it changed.

pytest-django ends a transactional test (`transactional_db`, and so `live`) with Django's
flush: one TRUNCATE of every table (42 of them), then the post_migrate signal, which makes
the content types, the permissions and django-guardian's anonymous user again. That took
0.13 to 1.8 s a test, about 700 tests a run: the largest single cost of the suite
(docs/testing.md). A TRUNCATE makes new files for the table and each of its indexes, and
most tests touch a handful of tables.

So the first flush of a session runs as before, and what it leaves (the baseline: every
table empty but the rows post_migrate made) is copied into a schema of the test database.
After each later test one read-only query fingerprints every table (its row count and the
sum of its rows' hashes); a table whose fingerprint differs from the baseline's is
emptied with DELETE and refilled from its copy, all in one transaction. The database
after that is the one the full flush leaves, row for row (ids included), and the
sequences go on as they did (the flush does not reset them either).

The DELETEs run with `session_replication_role = replica`: the foreign keys are not
checked while the rows that referred to each other go together, as TRUNCATE does not check
them either; the guards that refuse to delete audit rows fire even then (ENABLE ALWAYS,
migration 0022) and are switched off inside the transaction (tests/tamper.py). Setting
it needs a superuser, as the tests' role is here; anywhere it is refused, or anything
else in the fast path fails, the test's flush is the full one.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, transaction

from tests.tamper import triggers_off

log = logging.getLogger(__name__)

SCHEMA = "steward_test_baseline"


class Baseline:
    """What a database holds right after a full flush, and how to get back to it."""

    def __init__(self, connection, *, schema: str = SCHEMA):
        self.alias = connection.alias
        self.schema = schema
        self.tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
        self.seen: dict[str, tuple[int, int]] = {}
        self.columns: dict[str, str] = {}
        self.triggers: dict[tuple[str, str], str] = {}

    @property
    def connection(self):
        """This alias's connection as the code running now sees it, never one kept from the
        first test: Django keeps connections per context (asgiref.local), and a browser
        test's Playwright loop gives later tests another. The transaction below must be
        opened on the connection whose cursor runs the statements: on a kept one, the
        cursor ran in autocommit and its DISABLE TRIGGER stayed."""
        from django.db import connections

        return connections[self.alias]

    def capture(self) -> None:
        """Copy every non-empty table into SCHEMA and keep every table's fingerprint."""
        self.seen = fingerprints(self.connection, self.tables)
        self.triggers = trigger_states(self.connection)
        quote = self.connection.ops.quote_name
        with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cur:
            cur.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
            cur.execute(f"CREATE SCHEMA {self.schema}")
            for table, (rows, _) in self.seen.items():
                if not rows:
                    continue
                names = self._columns(cur, table)
                self.columns[table] = names
                cur.execute(f"CREATE TABLE {self.schema}.{quote(table)} AS SELECT {names} FROM {quote(table)}")

    def restore(self) -> bool:
        """Put back every table the test changed; False if it could not (nothing changed)."""
        changed = [
            table for table, seen in fingerprints(self.connection, self.tables).items() if seen != self.seen[table]
        ]
        if not changed:
            return True
        quote = self.connection.ops.quote_name
        try:
            with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cur:
                cur.execute("SET LOCAL statement_timeout = 0")
                cur.execute("SET LOCAL session_replication_role = replica")
                # Replica mode skips every trigger but the ALWAYS ones: the guards of the
                # tables that keep every row (migration 0022), which only their owner can
                # switch off, inside this transaction.
                always = f"tgenabled = 'A' AND tgrelid = ANY({_array(changed)}::regclass[])"
                with triggers_off(cur, always):
                    for table in changed:
                        cur.execute(f"DELETE FROM {quote(table)}")
                for table in changed:
                    if table in self.columns:
                        names = self.columns[table]
                        cur.execute(
                            f"INSERT INTO {quote(table)} ({names}) OVERRIDING SYSTEM VALUE "
                            f"SELECT {names} FROM {self.schema}.{quote(table)}"
                        )
        except DatabaseError as exc:
            log.warning("the fast reset failed (%s); flushing every table", exc)
            return False
        return True

    def triggers_changed(self) -> dict[tuple[str, str], tuple[str, str | None]]:
        """{(table, trigger): (as the migrations left it, now)} for each user trigger a test
        switched (or dropped) and left so: a guard left off would let every later test of
        this database pass where it should be refused."""
        now = trigger_states(self.connection)
        return {key: (was, now.get(key)) for key, was in self.triggers.items() if now.get(key) != was}

    def _columns(self, cur, table: str) -> str:
        cur.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s AND is_generated = 'NEVER' ORDER BY ordinal_position",
            [table],
        )
        return ", ".join(self.connection.ops.quote_name(name) for (name,) in cur.fetchall())


def _array(tables: list[str]) -> str:
    """An SQL array literal of table names (Django's own, never user input)."""
    return "ARRAY[" + ", ".join("'" + t.replace("'", "''") + "'" for t in tables) + "]"


def trigger_states(connection) -> dict[tuple[str, str], str]:
    """{(table, trigger): tgenabled} for every user trigger of the database."""
    with connection.cursor() as cur:
        cur.execute("SELECT tgrelid::regclass::text, tgname, tgenabled::text FROM pg_trigger WHERE NOT tgisinternal")
        return {(table, name): enabled for table, name, enabled in cur.fetchall()}


def fingerprints(connection, tables: list[str]) -> dict[str, tuple[int, int]]:
    """{table: (rows, sum of the rows' hashes)} for every table, in one statement (one snapshot)."""
    quote = connection.ops.quote_name
    parts = [f"SELECT %s, count(*), coalesce(sum(hashtext(r::text)), 0) FROM {quote(t)} r" for t in tables]
    with connection.cursor() as cur:
        cur.execute(" UNION ALL ".join(parts), tables)
        return {table: (int(rows), int(digest)) for table, rows, digest in cur.fetchall()}


def full_flush(connection) -> None:
    """Django's flush, as pytest-django runs it after a transactional test (post_migrate included)."""
    from django.core.management import call_command

    call_command(
        "flush",
        verbosity=0,
        interactive=False,
        database=connection.alias,
        reset_sequences=False,
        allow_cascade=False,
        inhibit_post_migrate=False,
    )
