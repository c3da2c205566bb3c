"""The audit trail over the API: a query, its export (exactly the same events, with
their hash-chain positions), and verify naming a tenant's own first bad row."""

from __future__ import annotations

import itertools
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from runtime.models import AuditEvent
from runtime.tasks.services import task_submit
from runtime.trail.services import audit_record
from tests.api.conftest import Api, assert_error, make_token
from tests.api.world import ALICE
from tests.people import make_people
from tests.tamper import bypassing_the_triggers


def export(api: Api, **query) -> list[dict]:
    response = api.get("audit/export", **query)
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


def paged(api: Api, **query) -> list[dict]:
    items, cursor = [], None
    while True:
        body = api.get("audit", limit=50, **({"cursor": cursor} if cursor else {}), **query).json()
        items += body["items"]
        cursor = body["next_cursor"]
        if cursor is None:
            return items


def test_the_export_holds_exactly_the_events_of_its_query_with_their_chain_positions(alice):
    for i in range(3):
        task_submit(agent="t.steps", input={"i": i}, **ALICE)
    for i in range(1100):  # past two export pages of 500, interleaved with other kinds
        audit_record(
            actor="user:alice" if i % 3 else "user:dave",
            tenant="acme",
            kind="note" if i % 2 else "other",
            data={"i": i},
        )
    audit_record(actor="user:carol", tenant="globex", kind="note")
    query = {"kind": "note", "actor": "user:alice", "since": (timezone.now() - timedelta(hours=1)).isoformat()}

    lines = export(alice, **query)
    wanted = AuditEvent.objects.filter(tenant="acme", kind="note", actor="user:alice").order_by("-at", "-id")
    assert [e["id"] for e in lines] == list(wanted.values_list("id", flat=True))
    assert lines == paged(alice, **query)
    assert len(lines) == 367
    row = AuditEvent.objects.get(id=lines[0]["id"])
    assert (lines[0]["chain"], lines[0]["chain_seq"], lines[0]["hash"], lines[0]["prev_hash"]) == (
        row.chain,
        row.chain_seq,
        bytes(row.hash).hex(),
        bytes(row.prev_hash).hex(),
    )


def test_a_tasks_export_is_its_chain_each_row_linked_to_the_one_before(alice):
    task_id = alice.post("tasks", {"agent": "t.steps"}).json()["id"]
    alice.post(f"tasks/{task_id}/cancel", {"reason": "r"})
    alice.post(f"tasks/{task_id}/resume", {"note": "n"})
    lines = export(alice, task=task_id)[::-1]
    assert [e["kind"] for e in lines] == ["task.submitted", "task.stopping", "task.cancelled", "task.resumed"]
    assert [e["chain_seq"] for e in lines] == [1, 2, 3, 4]
    assert all(later["prev_hash"] == earlier["hash"] for earlier, later in itertools.pairwise(lines))


def test_an_export_with_a_bad_filter_is_refused_before_it_streams(alice):
    assert_error(alice.get("audit/export", since="yesterday"), 422, "INVALID_REQUEST")


def test_one_event_is_answered_with_its_chain_position(alice):
    event_id = audit_record(actor="user:alice", tenant="acme", kind="note", data={"x": 1})
    body = alice.get(f"audit/{event_id}").json()
    row = AuditEvent.objects.get(id=event_id)
    assert (body["kind"], body["data"], body["chain"], body["chain_seq"]) == (
        "note",
        {"x": 1},
        "tenant:acme",
        row.chain_seq,
    )
    assert body["at"] == row.at.isoformat()  # to the microsecond: `at` is part of the row's hash


@pytest.mark.django_db(transaction=True)
def test_verify_names_the_tenants_first_bad_row_and_not_another_tenants():
    people = make_people()
    alice, carol = Api(make_token(people.alice)), Api(make_token(people.carol))
    for _ in range(2):
        alice.post("tasks", {"agent": "t.steps"})
        carol.post("tasks", {"agent": "t.steps"})
    clean = alice.post("audit/verify").json()
    assert (clean["ok"], clean["first_bad"], clean["seal_problems"]) == (True, None, [])
    assert clean["rows_checked"] == AuditEvent.objects.filter(tenant="acme").count()

    theirs = AuditEvent.objects.filter(tenant="globex", kind="task.submitted").first()
    bypassing_the_triggers("UPDATE steward_audit SET actor = 'user:mallory' WHERE id = %s", [theirs.id])
    assert alice.post("audit/verify").json()["ok"] is True  # not acme's row: not acme's to see
    bad = carol.post("audit/verify").json()
    assert bad["ok"] is False
    assert (bad["first_bad"]["id"], bad["first_bad"]["problem"]) == (theirs.id, "hash")
    assert "no longer matches its hash" in bad["first_bad"]["message"]
