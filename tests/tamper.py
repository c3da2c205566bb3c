"""Going past Steward's storage guards the only way left (migration 0022): ALTER TABLE ...
DISABLE TRIGGER, which takes the table's owner or a superuser. `session_replication_role
= replica` no longer does it: the guards are ENABLE ALWAYS (tests/runtime/test_storage_guards.py).

Each switch happens inside the caller's transaction, so no other session ever sees a
trigger off, and every trigger is put back as it was (ENABLE, or ENABLE ALWAYS)."""

from __future__ import annotations

import contextlib

from django.db import connection, transaction

_ENABLE = {"O": "ENABLE", "A": "ENABLE ALWAYS", "R": "ENABLE REPLICA"}
# The statement triggers that refuse TRUNCATE: BEFORE (2) and TRUNCATE (32) in tgtype.
TRUNCATE_GUARDS = "tgtype & 34 = 34"
# Every trigger of the audit trail and its seals: the append-only guards and the link.
AUDIT_TRIGGERS = "tgrelid IN ('steward_audit'::regclass, 'steward_audit_seal'::regclass)"


@contextlib.contextmanager
def triggers_off(cur, which: str):
    """The enabled user triggers matching `which` (SQL over pg_trigger) off for the block."""
    cur.execute(
        "SELECT tgrelid::regclass::text, quote_ident(tgname), tgenabled FROM pg_trigger "
        f"WHERE NOT tgisinternal AND tgenabled <> 'D' AND {which}"
    )
    triggers = cur.fetchall()
    for table, trigger, _ in triggers:
        cur.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
    yield
    for table, trigger, enabled in triggers:
        cur.execute(f"ALTER TABLE {table} {_ENABLE[enabled]} TRIGGER {trigger}")


def bypassing_the_triggers(sql: str, params=()) -> None:
    """Run `sql` on the audit trail or its seals with their triggers off: what a superuser
    or the tables' owner can do, and only the hash chains and the seals can show."""
    with transaction.atomic(), connection.cursor() as cur, triggers_off(cur, AUDIT_TRIGGERS):
        cur.execute(sql, params)
