"""The audit trail (docs/contracts.md "Audit"): PostgreSQL itself refuses UPDATE and DELETE,
every transition writes its row in the same transaction, and the per-task hash chains
let `verify` name the first row that was tampered with.

Tampering is done the way a superuser or the tables' owner still could: ALTER TABLE ...
DISABLE TRIGGER (tests/tamper.py). `session_replication_role = replica`, which once
switched the append-only trigger off for a session, no longer does (migration 0022).
"""

from __future__ import annotations

import io
import re

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from runtime import states
from runtime.models import AuditEvent, Task
from runtime.stops.services import task_stop
from runtime.tasks.services import task_resume
from runtime.trail.services import Tampered, audit_problems, audit_verify
from tests.runtime.inprocess import NAP, run, submit, wake
from tests.tamper import bypassing_the_triggers


def chain(task_id) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(chain=f"task:{task_id}").order_by("chain_seq"))


def assert_linked(rows: list[AuditEvent]) -> None:
    assert [r.chain_seq for r in rows] == list(range(1, len(rows) + 1))
    assert [bytes(r.prev_hash) for r in rows] == [b""] + [bytes(r.hash) for r in rows[:-1]]
    assert all(len(bytes(r.hash)) == 32 for r in rows)  # sha256, raw bytes
    assert len({bytes(r.hash) for r in rows}) == len(rows)


def every_bad_row() -> set[int]:
    """Every row verify finds wrong, not just the first, so a test can see that the other
    chains still verify."""
    return {bad.id for bad in audit_problems()}


@pytest.fixture
def two_chains(live):
    """Two completed tasks of three audit rows each, interleaved by id: both are
    submitted before either runs."""
    a, b = submit("t.steps", {"n": 1}), submit("t.steps", {"n": 1})
    run()
    rows_a, rows_b = chain(a), chain(b)
    assert (
        [r.kind for r in rows_a] == [r.kind for r in rows_b] == ["task.submitted", "attempt.started", "task.completed"]
    )
    assert rows_a[0].id < rows_b[0].id < rows_a[1].id
    assert audit_verify() is None and every_bad_row() == set()
    return rows_a, rows_b


# --- append-only -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE steward_audit SET data = '{\"forged\": true}'::jsonb WHERE id = %(id)s",
        "UPDATE steward_audit SET actor = 'user:mallory' WHERE id = %(id)s",
        "DELETE FROM steward_audit WHERE id = %(id)s",
        "DELETE FROM steward_audit",
    ],
)
def test_postgres_refuses_to_update_or_delete_audit_rows(two_chains, statement):
    row = two_chains[0][1]
    rows = AuditEvent.objects.count()  # the two chains, and the default pool's pool.created

    with pytest.raises(DatabaseError) as refused, transaction.atomic(), connection.cursor() as cur:
        cur.execute(statement, {"id": row.id})

    assert isinstance(refused.value.__cause__, psycopg.errors.InsufficientPrivilege)
    assert "steward_audit is append-only" in str(refused.value)
    assert re.search(r"(UPDATE|DELETE) refused on row \d+", str(refused.value))
    after = AuditEvent.objects.get(id=row.id)
    assert (after.actor, after.data, after.hash) == (row.actor, row.data, row.hash)
    assert AuditEvent.objects.count() == rows


def test_the_orm_cannot_change_audit_rows_either(two_chains):
    row = two_chains[0][1]
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(id=row.id).update(kind="forged")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(id=row.id).delete()
    assert AuditEvent.objects.get(id=row.id).kind == "attempt.started"


# --- every transition, chained ---------------------------------------------------------------


def test_every_transition_of_a_task_writes_its_audit_row_into_the_tasks_hash_chain(live):
    task_id = submit("t.sleeper", {"seconds": NAP})
    run()
    wake()
    run()

    rows = chain(task_id)
    assert Task.objects.get(id=task_id).status == states.COMPLETED
    assert [(r.kind, r.actor) for r in rows] == [
        ("task.submitted", "user:alice"),
        ("attempt.started", "worker:test"),
        ("task.sleeping", "worker:test"),
        ("task.woken", "supervisor:test"),
        ("attempt.started", "worker:test"),
        ("task.completed", "worker:test"),
    ]
    assert [r.data.get("epoch") for r in rows] == [None, 1, 1, None, 2, 2]
    assert {(r.tenant, r.task_id) for r in rows} == {("acme", task_id)}
    assert_linked(rows)
    assert audit_verify() is None


def test_failures_and_operator_transitions_are_chained_too(live):
    failing = submit("t.child", {"value": 1, "fail": True})
    stopped = submit("t.sleeper", {"seconds": 3600})
    run()
    task_stop(task_id=stopped, actor="user:alice", reason="enough")
    task_resume(task_id=stopped, actor="user:alice", note="go on")

    assert [r.kind for r in chain(failing)] == ["task.submitted", "attempt.started", "task.failed"]
    assert [(r.kind, r.actor) for r in chain(stopped)] == [
        ("task.submitted", "user:alice"),
        ("attempt.started", "worker:test"),
        ("task.sleeping", "worker:test"),
        ("task.stopping", "user:alice"),  # admission closed, timer dropped
        ("task.cancelled", "user:alice"),  # nothing ran: every boundary acknowledged at once
        ("task.resumed", "user:alice"),
    ]
    for task_id in (failing, stopped):
        assert_linked(chain(task_id))
    assert audit_verify() is None


@pytest.fixture
def audit_insert_fails(live):
    """fail(kind): from now on, inserting an audit row of that kind raises."""
    with connection.cursor() as cur:
        cur.execute("""
            CREATE FUNCTION test_refuse_audit_kind() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.kind = TG_ARGV[0] THEN RAISE EXCEPTION 'test: audit write of % failed', NEW.kind; END IF;
                RETURN NEW;
            END $$""")

    def fail(kind: str) -> None:
        with connection.cursor() as cur:
            cur.execute(
                "CREATE TRIGGER test_refuse_audit_kind BEFORE INSERT ON steward_audit FOR EACH ROW "
                f"EXECUTE FUNCTION test_refuse_audit_kind('{kind}')"
            )

    yield fail
    with connection.cursor() as cur:
        cur.execute("DROP TRIGGER IF EXISTS test_refuse_audit_kind ON steward_audit")
        cur.execute("DROP FUNCTION test_refuse_audit_kind()")


@pytest.mark.parametrize(
    "kind, act, status_stays",
    [
        ("attempt.started", lambda task_id: run(), states.QUEUED),
        ("task.completed", lambda task_id: run(), states.RUNNING),
        (
            "task.cancelled",
            lambda task_id: task_stop(task_id=task_id, actor="user:alice", reason="test"),
            states.QUEUED,
        ),
    ],
    ids=["claim", "complete", "cancel"],
)
def test_a_transition_whose_audit_row_cannot_be_written_does_not_happen(audit_insert_fails, kind, act, status_stays):
    task_id = submit("t.steps", {"n": 1})
    audit_insert_fails(kind)

    with pytest.raises(psycopg.Error, match=f"audit write of {kind} failed"):
        act(task_id)

    assert Task.objects.get(id=task_id).status == status_stays
    assert not AuditEvent.objects.filter(task_id=task_id, kind=kind).exists()


# --- verify ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "column, forged",
    [
        ("data", "'{\"epoch\": 7}'::jsonb"),
        ("actor", "'user:mallory'"),
        ("kind", "'attempt.forged'"),
        ("at", "at - interval '1 hour'"),
        ("tenant", "'other'"),
    ],
)
def test_verify_names_an_altered_row(two_chains, column, forged):
    (_, altered, _), _ = two_chains

    bypassing_the_triggers(f"UPDATE steward_audit SET {column} = {forged} WHERE id = %s", [altered.id])

    assert audit_verify() == Tampered(id=altered.id, chain=altered.chain, chain_seq=2, problem="hash")
    # The next row still links to the stored hash, and the other chain is untouched.
    assert every_bad_row() == {altered.id}


def test_verify_names_the_row_after_a_deleted_one(two_chains):
    (_, deleted, after), _ = two_chains

    bypassing_the_triggers("DELETE FROM steward_audit WHERE id = %s", [deleted.id])

    assert audit_verify() == Tampered(id=after.id, chain=after.chain, chain_seq=3, problem="gap")
    assert every_bad_row() == {after.id}  # chain b's rows, before and after it, still verify


def test_verify_names_the_next_row_when_an_altered_row_was_rehashed(two_chains):
    (_, altered, after), _ = two_chains
    forged = "'{\"epoch\": 7}'::jsonb"

    # A careful forger recomputes the altered row's own hash; its successor's link breaks.
    bypassing_the_triggers(
        f"UPDATE steward_audit SET data = {forged}, hash = steward_audit_hash("
        f"prev_hash, chain, chain_seq, at, actor, tenant, task_id, kind, {forged}) WHERE id = %s",
        [altered.id],
    )

    assert audit_verify() == Tampered(id=after.id, chain=after.chain, chain_seq=3, problem="link")
    assert every_bad_row() == {after.id}


def test_verify_reports_the_first_bad_row_by_id(two_chains):
    rows_a, rows_b = two_chains
    bypassing_the_triggers(
        "UPDATE steward_audit SET actor = 'user:mallory' WHERE id IN (%s, %s)", [rows_a[2].id, rows_b[1].id]
    )

    assert audit_verify().id == min(rows_a[2].id, rows_b[1].id)
    assert every_bad_row() == {rows_a[2].id, rows_b[1].id}


def test_the_verify_command_exits_3_and_names_the_tampered_row(two_chains):
    (_, altered, _), _ = two_chains
    out = io.StringIO()
    call_command("steward", "audit", "verify", stdout=out)
    assert "audit trail verified" in out.getvalue()

    bypassing_the_triggers("UPDATE steward_audit SET actor = 'user:mallory' WHERE id = %s", [altered.id])

    with pytest.raises(CommandError) as failed:
        call_command("steward", "audit", "verify")
    assert failed.value.returncode == 3
    assert str(failed.value).startswith("TAMPERED: ")
    assert f"audit row {altered.id} " in str(failed.value)
