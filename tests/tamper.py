"""Going past Steward's storage guards the only way left (migration 0022): ALTER TABLE ...
DISABLE TRIGGER, which takes the table's owner or a superuser. `session_replication_role
= replica` no longer does it: the guards are ENABLE ALWAYS (tests/runtime/test_storage_guards.py).

Each switch happens inside the caller's transaction, so no other session ever sees a
trigger off, and every trigger is put back as it was (ENABLE, or ENABLE ALWAYS)."""

from __future__ import annotations

import contextlib
import re

from django.db import connection, transaction

_ENABLE = {"O": "ENABLE", "A": "ENABLE ALWAYS", "R": "ENABLE REPLICA"}
# The statement triggers that refuse TRUNCATE: BEFORE (2) and TRUNCATE (32) in tgtype.
TRUNCATE_GUARDS = "tgtype & 34 = 34"
# Every trigger of the audit trail and its seals: the append-only guards and the link.
AUDIT_TRIGGERS = "tgrelid IN ('steward_audit'::regclass, 'steward_audit_seal'::regclass)"


@contextlib.contextmanager
def triggers_off(cur, which: str):
    """The enabled user triggers matching `which` (SQL over pg_trigger) off for the block,
    which must run in a transaction (`cur`'s own connection's): outside one, each DISABLE
    would commit at once and stay if the block failed."""
    if not cur.db.in_atomic_block:
        raise RuntimeError("triggers_off needs a transaction on the cursor's own connection")
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
    """Run `sql` with the triggers of the audit trail, its seals and every steward_ table
    it names off: what a superuser or the tables' owner can do, and only the hash chains
    and the seals can show."""
    named = sorted(set(re.findall(r"\bsteward_\w+", sql)))
    which = AUDIT_TRIGGERS
    if named:
        # Functions are named steward_ too: only the names that are tables count.
        names = ", ".join(f"'{name}'" for name in named)
        which = f"({AUDIT_TRIGGERS} OR tgrelid IN (SELECT to_regclass(n) FROM unnest(ARRAY[{names}]) n))"
    with transaction.atomic(), connection.cursor() as cur:
        # Replica mode too, for the foreign keys: a superuser deleting a seal its heads
        # refer to leaves them dangling, as only the seals' verify can then tell.
        cur.execute("SET LOCAL session_replication_role = replica")
        with triggers_off(cur, which):
            cur.execute(sql, params)
