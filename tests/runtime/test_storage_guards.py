"""The tables that keep every row refuse TRUNCATE too, and none of their guards is skipped
in replica mode (migration 0022, docs/adr/0022-database-roles.md).

This session connects as the test database's owner, a superuser on the embedded server
and in CI: the strongest role a trigger can still stop. What the application role may
not even try (TRUNCATE, DISABLE TRIGGER, replica mode) is tests/integration/test_roles.py.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from runtime.audit import audit_append

# Named by the issue that found TRUNCATE open (17): the audit trail, the decisions, the
# stops' acknowledgments and the seals. The probe below finds these and any other.
NAMED = {"steward_audit", "steward_decision", "steward_stop_ack", "steward_audit_seal"}


def refused(sql: str, params=()) -> DatabaseError:
    """Run `sql` in a savepoint that must fail; the error."""
    with pytest.raises(DatabaseError) as caught, transaction.atomic(), connection.cursor() as cur:
        cur.execute(sql, params)
    return caught.value


def tables_that_refuse_deletes() -> set[str]:
    """Every table with a BEFORE DELETE row trigger whose function refuses a DELETE made
    outside agent code. Read from the schema, not listed: each such function is tried on a
    temporary one-row table of the probe's own, where a refusal is the function's alone."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT DISTINCT tgrelid::regclass::text, tgfoid::regproc::text FROM pg_trigger "
            "WHERE NOT tgisinternal AND tgtype & 11 = 11"  # ROW (1), BEFORE (2), DELETE (8)
        )
        candidates = cur.fetchall()
    found = set()
    for table, function in candidates:
        try:
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute("CREATE TEMPORARY TABLE probe (id bigint) ON COMMIT DROP")
                cur.execute("INSERT INTO probe VALUES (1)")
                cur.execute(f"CREATE TRIGGER probe BEFORE DELETE ON probe FOR EACH ROW EXECUTE FUNCTION {function}()")
                cur.execute("DELETE FROM probe")
                raise _Allowed
        except _Allowed:
            continue
        except DatabaseError:
            found.add(table)
    return found


class _Allowed(Exception):
    """The probe's DELETE went through: roll it back and say so."""


@pytest.fixture
def guarded(db) -> set[str]:
    tables = tables_that_refuse_deletes()
    assert tables >= NAMED, tables  # the probe sees at least what the issue named
    return tables


def test_every_table_that_refuses_deletes_refuses_truncate_even_to_its_owner(guarded):
    """CASCADE: without it, a table another references is refused by the foreign key
    before any trigger runs, and that would prove nothing about the guard."""
    for table in sorted(guarded):
        error = refused(f"TRUNCATE {table} CASCADE")
        assert error.__cause__.sqlstate == "42501", (table, error)  # insufficient_privilege
        assert "keeps every row; TRUNCATE is never allowed" in str(error), table
    # Alone, where nothing references it: its own guard, named.
    assert "refused at storage: steward_audit keeps every row" in str(refused("TRUNCATE steward_audit"))


@pytest.mark.parametrize(
    "statement",
    [
        "TRUNCATE steward_audit, steward_audit_seal, steward_audit_seal_head",
        "TRUNCATE steward_audit RESTART IDENTITY",
        # A partition (migration 0032), truncated alone: its own guard.
        "TRUNCATE ONLY steward_decision_default CASCADE",
        "TRUNCATE steward_audit_legacy",
        # No guard on steward_task: the truncate cascades to tables that have one.
        "TRUNCATE steward_task CASCADE",
    ],
)
def test_no_form_of_truncate_reaches_a_guarded_table(guarded, statement):
    assert "keeps every row; TRUNCATE is never allowed" in str(refused(statement))


def test_truncate_only_of_a_partitioned_table_is_refused_by_postgresql_itself(guarded):
    """steward_decision has no rows of its own to truncate (migration 0032): its partitions do."""
    assert "cannot truncate only a partitioned table" in str(refused("TRUNCATE ONLY steward_decision CASCADE"))


def test_replica_mode_skips_none_of_the_guards(guarded):
    """`session_replication_role = replica` switches ordinary triggers off for a session; a
    superuser may set it, and on managed servers so may their admin role. The guards are
    ENABLE ALWAYS: they fire anyway."""
    with connection.cursor() as cur:
        cur.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if not cur.fetchone()[0]:
            pytest.skip("only a superuser may set session_replication_role")
    row = audit_append(actor="user:alice", tenant="acme", kind="pool.created", data={"name": "p"})

    def in_replica_mode(sql: str, params=()) -> DatabaseError:
        with pytest.raises(DatabaseError) as caught, transaction.atomic(), connection.cursor() as cur:
            cur.execute("SET LOCAL session_replication_role = replica")
            cur.execute(sql, params)
        return caught.value

    assert "append-only" in str(in_replica_mode("DELETE FROM steward_audit WHERE id = %s", [row]))
    assert "append-only" in str(in_replica_mode("UPDATE steward_audit SET actor = 'user:mallory' WHERE id = %s", [row]))
    for table in sorted(guarded):
        assert "TRUNCATE is never allowed" in str(in_replica_mode(f"TRUNCATE {table} CASCADE")), table
    with connection.cursor() as cur:
        cur.execute("SELECT actor FROM steward_audit WHERE id = %s", [row])
        assert cur.fetchone() == ("user:alice",)


def test_every_guard_is_enabled_always(guarded):
    """The whole set, as the schema has it: a guard added later as an ordinary trigger
    would be skipped in replica mode."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT tgrelid::regclass::text, tgname, tgenabled FROM pg_trigger WHERE NOT tgisinternal "
            "AND tgrelid::regclass::text = ANY(%s) AND (tgtype & 34 = 34 OR tgtype & 11 = 11)",
            [sorted(guarded)],
        )
        triggers = cur.fetchall()
    truncate_guarded = {table for table, name, _ in triggers if name.endswith("_no_truncate")}
    assert truncate_guarded == guarded
    row_guards = {(table, name) for table, name, _ in triggers if not name.endswith("_no_truncate")}
    assert {table for table, _ in row_guards} == guarded
    not_always = {(table, name) for table, name, enabled in triggers if enabled != "A"}
    # The grant's second row trigger only keeps agent code out (it refuses no delete of
    # an operator's); it stays an ordinary trigger, as the budgets' guards do.
    assert not_always <= {("steward_grant", "steward_grant_not_from_agent_code")}, not_always
