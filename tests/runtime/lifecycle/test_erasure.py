"""Erasure by subject (runtime/lifecycle/erasure.py): after it, a search of every text,
jsonb and bytea column of the schema and of every Redis key finds none of the erased
values; the rows stay as tombstones with their hashes, so the audit chains and the seals
still verify; the receipt is signed, and a changed one fails; the preview is what the
receipt then records; and no payload is ever logged."""

from __future__ import annotations

import logging
import os
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis
from django.conf import settings
from django.db import DatabaseError, connection, transaction

from runtime import states
from runtime.agents import agent
from runtime.errors import ErasureSubjectLive, InvalidArgument, StepFailed, TaskNotFound
from runtime.ids import uuid7
from runtime.lifecycle import statements
from runtime.lifecycle.erasure import Subject, erasure_preview, erasure_run, receipt_check
from runtime.lifecycle.registry import PLACES, SubjectKind, place
from runtime.memory import services
from runtime.models import Approval, ErasureReceipt, MemoryRecord, Step, Task
from runtime.testing import StewardTestEnv
from runtime.trail.seals import seal_problems
from runtime.trail.services import audit_seal_now, audit_verify
from tests.runtime.memory import kinds  # noqa: F401  (declares test_note, memory.reader and memory.writer)

pytestmark = pytest.mark.django_db(transaction=True)

FORGET = "zebra-quartz-7731"  # the erased subject's distinctive value
KEEP = "walrus-onyx-2209"  # another tree's, which must survive


def _boom(value):
    raise ValueError(f"cannot use {value}")


def _send(value, *, idempotency_key):
    return {"sent": value, "id": idempotency_key[-8:]}


@agent("lifecycle.keeper")
def keeper(ctx, input):
    secret = input["secret"]
    echoed = ctx.step("echo", lambda v: {"echo": v}, secret)
    try:
        ctx.step("boom", _boom, secret)
    except StepFailed:
        pass
    sent = ctx.effect("send", _send, secret, effect_class="idempotent", keyed=True)
    if input.get("children"):
        kids = [ctx.spawn("lifecycle.keeper", {"secret": f"{secret}-child{i}"}) for i in range(input["children"])]
        ctx.wait(kids)
    if input.get("approve"):
        ctx.request_approval({"op": "publish", "text": secret}, effect_class="irreversible", expires_in=3600)
    return {"out": echoed, "receipt": sent}


def _columns() -> list[tuple[str, str, str]]:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
            "JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
            "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' "
            "AND c.data_type IN ('text', 'character varying', 'character', 'jsonb', 'json', 'bytea', 'ARRAY')"
        )
        return cur.fetchall()


def tables_holding(value: str) -> set[str]:
    """Every (table.column) of the schema whose text, jsonb, bytea or array holds `value`."""
    found = set()
    with connection.cursor() as cur:
        for table, column, kind in _columns():
            t, c = connection.ops.quote_name(table), connection.ops.quote_name(column)
            if kind == "bytea":
                cur.execute(f"SELECT count(*) FROM {t} WHERE position(convert_to(%s, 'UTF8') IN {c}) > 0", [value])
            else:
                cur.execute(f"SELECT count(*) FROM {t} WHERE {c}::text LIKE %s", [f"%{value}%"])
            if cur.fetchone()[0]:
                found.add(f"{table}.{column}")
    return found


def redis_holding(value: str) -> set[str]:
    """Every Redis key whose name or value holds `value`, whatever its type."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    needle = value.encode()
    found = set()
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        if kind == "string":
            parts = [client.get(key) or b""]
        elif kind == "list":
            parts = client.lrange(key, 0, -1)
        elif kind == "hash":
            parts = [b for pair in client.hgetall(key).items() for b in pair]
        elif kind == "set":
            parts = list(client.smembers(key))
        elif kind == "zset":
            parts = [m for m, _ in client.zrange(key, 0, -1, withscores=True)]
        elif kind == "stream":
            parts = [b for _, fields in client.xrange(key) for pair in fields.items() for b in pair]
        else:
            parts = []
        if needle in key or any(needle in p for p in parts):
            found.add(key.decode())
    return found


@pytest.fixture
def steward():
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(match="steward:quota:*"):  # another test's
        client.delete(key)
    with StewardTestEnv(tenant="acme", owner="user:alice") as env:
        yield env


def _finished_tree(env, secret, *, children=2, owner=None):
    root = env.submit("lifecycle.keeper", {"secret": secret, "children": children}, owner=owner)
    env.run_until_idle()
    assert env.result(root).status == states.COMPLETED
    return root


def test_after_an_erasure_no_table_and_no_redis_key_holds_the_erased_values(steward, caplog):
    caplog.set_level(logging.INFO)
    forget = _finished_tree(steward, FORGET)
    keep = _finished_tree(steward, KEEP)
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.set(f"steward:quota:acme:{FORGET}:1", 1)  # a key of the tenant (not the tree's)
    places = tables_holding(FORGET)
    # The test can fail: before, the value is everywhere a payload goes.
    assert {"steward_task.input", "steward_task.output", "steward_step.output", "steward_step.error"} <= places
    assert "steward_effect.receipt" in places
    assert not [p for p in places if p.startswith("steward_audit")], places  # audit rows never copy payloads

    preview = erasure_preview(subject=Subject.of(kind="task", tenant="acme", value=str(forget)))
    receipt = erasure_run(
        subject=Subject.of(kind="task", tenant="acme", value=str(forget)), actor="user:alice", reason="asked to"
    )

    assert tables_holding(FORGET) == set()
    assert redis_holding(FORGET) == {f"steward:quota:acme:{FORGET}:1"}  # a tree erasure leaves the tenant's keys
    assert tables_holding(KEEP) >= {"steward_task.input", "steward_step.output"}  # another tree is untouched
    assert Task.objects.get(id=keep).erased_at is None
    # Tombstones: the rows stay, with the hash kept and the one the tombstone wrote.
    tree = Task.objects.filter(root_id=forget)
    assert tree.count() == 3 == preview.tasks
    for task in tree:
        assert task.erased_at is not None and task.erased_by == f"erasure:{receipt.id}"
        assert len(bytes(task.erased_hash)) == 32 and len(task.input_digest) == 64
        assert task.input is None and task.output is None
    assert receipt.body["tasks"] == 3
    # The chains and the seals still verify.
    audit_seal_now()
    assert audit_verify() is None
    assert seal_problems() == []
    assert receipt_check(receipt) == []
    assert FORGET not in caplog.text and KEEP not in caplog.text


def test_the_preview_is_what_the_receipt_records(steward):
    forget = _finished_tree(steward, FORGET, children=3)
    subject = Subject.of(kind="task", tenant="acme", value=str(forget))
    preview = erasure_preview(subject=subject)
    receipt = erasure_run(subject=subject, actor="user:alice", reason="asked to")
    assert preview.places == {p["place"]: p["rows"] for p in receipt.body["places"]}
    tree = Task.objects.filter(root_id=forget).values("id")
    assert preview.places["task"] == 4 and preview.places["effect"] == 4
    assert preview.places["journal"] == Step.objects.filter(task_id__in=tree).count() > 4 * 2
    assert preview.redis == receipt.body["redis"]["keys"] and preview.exports == receipt.body["exports"] == []
    assert receipt.rows == preview.rows
    # Erased once: a second erasure finds nothing left, and says so.
    again = erasure_preview(subject=subject)
    assert again.rows == 0


def test_a_tenant_erasure_deletes_its_redis_keys_and_keeps_other_tenants(steward):
    _finished_tree(steward, FORGET, children=0)
    other = steward.submit("lifecycle.keeper", {"secret": KEEP}, tenant="globex")
    steward.run_until_idle()
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.set("steward:quota:acme:model:1", 3)
    client.set("steward:quota:globex:model:1", 3)
    subject = Subject.of(kind="tenant", tenant="acme")
    preview = erasure_preview(subject=subject)
    assert preview.redis == ["steward:quota:acme:model:1"]
    receipt = erasure_run(subject=subject, actor="user:alice", reason="tenant left")
    assert receipt.body["redis"]["keys"] == ["steward:quota:acme:model:1"]
    assert client.exists("steward:quota:acme:model:1") == 0 and client.exists("steward:quota:globex:model:1") == 1
    assert tables_holding(FORGET) == set()
    assert Task.objects.get(id=other).input == {"secret": KEEP}


def test_an_owner_erasure_takes_only_that_owners_tasks(steward):
    mine = _finished_tree(steward, FORGET, children=1, owner="user:dave")
    theirs = _finished_tree(steward, KEEP, children=1)
    erasure_run(subject=Subject.of(kind="owner", tenant="acme", value="user:dave"), actor="user:alice", reason="gdpr")
    assert tables_holding(FORGET) == set()
    assert Task.objects.get(id=theirs).output is not None
    assert Task.objects.get(id=mine).erased_at is not None


def test_an_approvals_quoted_action_is_erased_and_its_hash_kept(steward):
    task = steward.submit("lifecycle.keeper", {"secret": FORGET, "approve": True})
    steward.run_until_idle()
    steward.approve(task)
    steward.run_until_idle()
    assert steward.result(task).status == states.COMPLETED
    before = Approval.objects.get(task_id=task)
    assert "steward_approval.action" in tables_holding(FORGET)
    erasure_run(subject=Subject.of(kind="task", tenant="acme", value=str(task)), actor="user:alice", reason="x")
    after = Approval.objects.get(task_id=task)
    assert after.action is None and after.action_hash == before.action_hash and after.state == before.state
    assert tables_holding(FORGET) == set()
    assert audit_verify() is None


def test_a_changed_receipt_no_longer_verifies(steward):
    forget = _finished_tree(steward, FORGET, children=0)
    receipt = erasure_run(
        subject=Subject.of(kind="task", tenant="acme", value=str(forget)), actor="user:alice", reason="asked"
    )
    assert receipt_check(ErasureReceipt.objects.get(id=receipt.id)) == []
    forged = ErasureReceipt.objects.get(id=receipt.id)
    forged.body["places"][0]["rows"] += 1
    assert "signature does not match" in receipt_check(forged)[0]
    # The table refuses the change itself: receipts are append-only.
    with pytest.raises(Exception, match="append-only"), connection.cursor() as cur:
        cur.execute("UPDATE steward_erasure_receipt SET rows = 0")


def test_a_live_tree_is_refused_and_nothing_is_erased(steward):
    task = steward.submit("lifecycle.keeper", {"secret": FORGET})
    with pytest.raises(ErasureSubjectLive):
        erasure_run(subject=Subject.of(kind="task", tenant="acme", value=str(task)), actor="user:alice", reason="x")
    assert Task.objects.get(id=task).input == {"secret": FORGET}
    assert ErasureReceipt.objects.count() == 0


@pytest.mark.parametrize(
    ("kind", "tenant", "value", "error"),
    [
        ("planet", "acme", "x", InvalidArgument),
        ("task", "acme", "not-a-uuid", TaskNotFound),
        ("task", "acme", "0" * 10_000, TaskNotFound),
        ("task", "acme", "00000000-0000-7000-8000-000000000000", TaskNotFound),
        ("owner", "acme", "x" * 5000, InvalidArgument),
        ("owner", "acme", "user:\x00nul", InvalidArgument),
        ("tenant", "", None, InvalidArgument),
        ("tenant", "a" * 1000, None, InvalidArgument),
        ("tenant", "\udcff", None, InvalidArgument),
    ],
)
def test_hostile_subjects_are_refused_with_a_stable_code(steward, kind, tenant, value, error):
    with pytest.raises(error):
        erasure_preview(subject=Subject.of(kind=kind, tenant=tenant, value=value))
    assert ErasureReceipt.objects.count() == 0


def test_every_payload_place_has_tombstone_columns():
    """A registry entry whose table lacks the tombstone's columns would fail at the first
    erasure: held here, for every entry (memory's too, once added)."""
    with connection.cursor() as cur:
        for place in PLACES:
            cur.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = %s",
                [place.table],
            )
            columns = {r[0] for r in cur.fetchall()}
            assert {"erased_at", "erased_by", "erased_hash", place.task, *place.payload} <= columns, place.name
            assert place.kept_hash is None or place.kept_hash in columns
            assert SubjectKind.TENANT in place.subjects


def _as_worker():
    """A connection to the test database as the worker role (the retention job's, in the sweep)."""
    url = urlsplit(os.environ["STEWARD_WORKER_DATABASE_URL"])
    return psycopg.connect(urlunsplit(url._replace(path="/" + connection.settings_dict["NAME"])), autocommit=False)


def test_the_worker_role_may_tombstone_every_place_but_not_while_agent_code_runs(steward):
    task = steward.submit("lifecycle.keeper", {"secret": FORGET, "approve": True})
    steward.run_until_idle()
    steward.approve(task)
    steward.run_until_idle()
    with _as_worker() as conn, conn.cursor() as cur:
        cur.execute("SELECT set_config('steward.agent_task', %s, false)", [str(task)])
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            cur.execute(statements.tombstone(place("approval")), {"tasks": [task], "by": "retention:x"})
        conn.rollback()
        for where in PLACES:
            cur.execute(statements.tombstone(where), {"tasks": [task], "by": "retention:x"})
        conn.commit()
    assert tables_holding(FORGET) == set()
    assert audit_verify() is None


def test_a_task_input_is_never_rewritten_only_erased(steward):
    task = steward.submit("lifecycle.keeper", {"secret": FORGET, "approve": True})
    steward.run_until_idle()
    steward.approve(task)
    steward.run_until_idle()
    with _as_worker() as conn, conn.cursor() as cur:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            cur.execute('UPDATE steward_task SET input = \'{"secret": "forged"}\' WHERE id = %s', [task])
        conn.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # an approval's action: only to its tombstone
            cur.execute(
                "UPDATE steward_approval SET action = '{\"forged\": 1}', erased_at = now() WHERE task_id = %s", [task]
            )
        conn.rollback()
    assert Task.objects.get(id=task).input == {"secret": FORGET, "approve": True}


# Agent memory: the "memory" place (runtime/lifecycle/registry.py).


def _remember(agent_name, key, text, *, tenant="acme"):
    return services.memory_put(
        tenant=tenant, agent=agent_name, kind="test_note", key=key, value={"text": text}, actor="user:alice"
    )


def test_an_agent_memory_erasure_leaves_no_table_holding_its_values_and_the_receipt_verifies(steward, caplog):
    caplog.set_level(logging.INFO)
    _remember("memory.reader", "a", f"{FORGET}-v1")
    _remember("memory.reader", "a", f"{FORGET}-v2")  # a superseded version is erased too
    _remember("memory.reader", "b", FORGET)
    _remember("memory.writer", "a", KEEP)  # another agent of the tenant
    _remember("memory.reader", "a", KEEP, tenant="globex")  # the same agent in another tenant
    assert tables_holding(FORGET) == {"steward_memory_record.payload"}  # the test can fail
    subject = Subject.of(kind="agent", tenant="acme", value="memory.reader")
    preview = erasure_preview(subject=subject)
    assert preview.places == {"memory": 3} and preview.tasks == 0
    receipt = erasure_run(subject=subject, actor="user:alice", reason="forget me")
    assert preview.places == {p["place"]: p["rows"] for p in receipt.body["places"]} and receipt.rows == 3
    assert tables_holding(FORGET) == set() and redis_holding(FORGET) == set()
    assert tables_holding(KEEP) == {"steward_memory_record.payload"}
    assert MemoryRecord.objects.filter(payload__text=KEEP).count() == 2
    for row in MemoryRecord.objects.filter(tenant="acme", agent="memory.reader"):
        assert row.payload is None and row.erased_by == f"erasure:{receipt.id}" and len(row.payload_hash) == 64
        assert len(bytes(row.erased_hash)) == 32
    assert receipt_check(ErasureReceipt.objects.get(id=receipt.id)) == []
    audit_seal_now()
    assert audit_verify() is None and seal_problems() == []
    assert FORGET not in caplog.text
    # What the agent reads now: no record.
    task = steward.submit("memory.reader", {"key": "a"})
    steward.run_until_idle()
    assert steward.result(task).output == {"found": None}
    assert erasure_preview(subject=subject).rows == 0  # erased once


def test_a_task_erasure_takes_the_memory_versions_that_task_wrote(steward):
    task = steward.submit("memory.writer", {"key": "n", "text": FORGET})
    steward.run_until_idle()
    assert steward.result(task).status == states.COMPLETED
    _remember("memory.writer", "m", KEEP)  # a person's write: no task, not this subject's
    assert "steward_memory_record.payload" in tables_holding(FORGET)
    erasure_run(subject=Subject.of(kind="task", tenant="acme", value=str(task)), actor="user:alice", reason="x")
    assert tables_holding(FORGET) == set()
    assert MemoryRecord.objects.get(key="m").payload["text"] == KEEP


def test_a_tenant_erasure_takes_its_memory_with_or_without_a_task(steward):
    _remember("memory.reader", "a", FORGET)
    _remember("memory.reader", "a", KEEP, tenant="globex")
    receipt = erasure_run(subject=Subject.of(kind="tenant", tenant="acme"), actor="user:alice", reason="left")
    assert {p["place"]: p["rows"] for p in receipt.body["places"]}["memory"] == 1
    assert tables_holding(FORGET) == set() and tables_holding(KEEP) == {"steward_memory_record.payload"}


@pytest.mark.parametrize(
    ("value", "error"),
    [(None, InvalidArgument), ("", InvalidArgument), ("a" * 5000, InvalidArgument), ("bad\x00name", InvalidArgument)],
)
def test_hostile_agent_subjects_are_refused(steward, value, error):
    with pytest.raises(error):
        erasure_preview(subject=Subject.of(kind="agent", tenant="acme", value=value))


def test_a_memory_version_is_never_rewritten_only_erased(steward):
    made = _remember("memory.reader", "a", FORGET)
    with pytest.raises(DatabaseError, match="never rewritten, only erased"), transaction.atomic():
        MemoryRecord.objects.filter(id=made.id).update(payload={"text": "forged"})  # the web role
    erase = statements.tombstone(place("memory"), SubjectKind.AGENT)
    params = {"tenant": "acme", "agent": "memory.reader", "by": "retention:x"}
    with _as_worker() as conn, conn.cursor() as cur:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # a tombstone that moves another column
            cur.execute(
                "UPDATE steward_memory_record SET payload = NULL, erased_at = now(), version = 9 WHERE id = %s",
                [made.id],
            )
        conn.rollback()
        cur.execute("SELECT set_config('steward.agent_task', %s, false)", [str(uuid7())])
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # never while agent code runs
            cur.execute(erase, params)
        conn.rollback()
        cur.execute(erase, params)  # its tombstone, as the retention job writes it
        conn.commit()
    row = MemoryRecord.objects.get(id=made.id)
    assert row.payload is None and row.erased_by == "retention:x" and row.version == 1
