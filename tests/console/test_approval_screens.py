"""The approvals inbox, one request's page, deciding it in two clicks, and what a request
decided elsewhere or gone stale while its page was open shows."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone

from runtime import states
from runtime.audit import AuditKind, audit_append
from runtime.authz.services import grant_create
from runtime.ids import uuid7
from runtime.models import Approval, AuditEvent


def test_the_inbox_lists_the_request_with_its_filters_in_the_url(world, as_person):
    client = as_person(world.people.bob)
    body = client.get("/approvals/?order=expiry").content.decode()
    assert f'id="approval-{world.approval.id}"' in body and "waiting for approval" in body
    assert 'value="expiry" selected' in body
    assert f'id="approval-{world.approval.id}"' not in client.get("/approvals/?state=denied").content.decode()
    assert f'id="approval-{world.approval.id}"' not in client.get("/approvals/?agent=other").content.decode()


def test_a_request_shows_its_action_laid_out_the_digest_the_taint_and_the_time_left(world, as_person):
    body = as_person(world.people.dave).get(f"/approvals/{world.approval.id}/").content.decode()
    assert "<dt>amount</dt><dd>10</dd>" in body and "<dt>op</dt><dd>pay</dd>" in body
    assert 'id="untrusted"' in body and "$.memo" in body
    # What it is bound to reads in an operator's words, each with its key beside it.
    for covered, label in (
        ("input_digest", "The input"),
        ("precondition", "The target as the agent read it"),
        ("policy_version", "The policy version"),
        ("authz_revision", "The agent&#x27;s grants"),
    ):
        assert f'<dt>{label} <code class="key">{covered}</code></dt>' in body
    assert not re.search(r"<dt>\s*[a-z]+_[a-z_]+\s*</dt>", body), "a bare key as a field's only name"
    assert 'id="changed"' not in body  # waiting: nothing went stale
    assert 'id="time-left"' in body and "started by user:alice" in body and "irreversible" in body
    assert 'formaction="/approvals/' in body


def test_an_operator_approves_in_two_clicks_with_a_comment(world, as_person):
    client = as_person(world.people.dave)
    client.get(f"/approvals/{world.approval.id}/")  # click one: open it
    response = client.post(f"/approvals/{world.approval.id}/approve/", {"comment": "checked the invoice"})
    assert response.status_code == 302
    approval = Approval.objects.get(id=world.approval.id)
    assert (approval.state, approval.decided_by, approval.comment) == ("approved", "user:dave", "checked the invoice")
    assert AuditEvent.objects.filter(kind="approval.approved", actor="user:dave").count() == 1
    task_page = client.get(f"/tasks/{world.blocked.id}/").content.decode()
    assert f'id="task-approval-{world.approval.id}"' in task_page and "checked the invoice" in task_page


def test_a_request_decided_elsewhere_while_open_is_refused_with_the_reason(world, as_person):
    client = as_person(world.people.dave)
    Approval.objects.filter(id=world.approval.id).update(
        state=states.DENIED, decided_by="user:erin", decided_at=timezone.now()
    )
    response = client.post(f"/approvals/{world.approval.id}/approve/", {"comment": "late"})
    assert response.status_code == 409
    body = response.content.decode()
    assert "APPROVAL_ALREADY_DECIDED" in body and "denied by user:erin" in body and 'id="not-decidable"' in body


def test_a_stale_request_shows_why_and_cannot_be_approved(world, as_person):
    client = as_person(world.people.dave)
    Approval.objects.filter(id=world.approval.id).update(
        state=states.STALE, decided_at=timezone.now(), stale_reason="the context changed: precondition"
    )
    page = client.get(f"/approvals/{world.approval.id}/").content.decode()
    assert "the context changed: precondition" in page and "formaction" not in page
    response = client.post(f"/approvals/{world.approval.id}/approve/", {})
    assert response.status_code == 409 and "the context changed: precondition" in response.content.decode()


def test_an_approve_of_a_request_gone_stale_shows_what_changed_inline(world, as_person):
    client = as_person(world.people.dave)
    before = world.approval.context["authz_revision"]
    grant_create(tenant="acme", principal="user:alice", action="note.write", resource="note:x", actor="user:dave")
    response = client.post(f"/approvals/{world.approval.id}/approve/", {"comment": "checked"})
    assert response.status_code == 409
    body = response.content.decode()
    assert "APPROVAL_STALE" in body and 'id="changed"' in body
    changed = f'The agent&#x27;s grants <code class="key">authz_revision</code></dt><dd class="mono small">{before} → {before + 1}</dd>'
    assert changed in body
    assert 'data-state="stale"' in body and 'id="not-decidable"' in body and "formaction" not in body
    assert "found stale when user:dave approved it" in body
    assert Approval.objects.get(id=world.approval.id).state == states.STALE
    # Looked at again later, the page still names what changed, before and after.
    page = client.get(f"/approvals/{world.approval.id}/").content.decode()
    assert 'id="changed"' in page and changed in page


def test_a_request_the_executor_found_stale_shows_what_it_was_prepared_with_and_what_it_is_now(world, as_person):
    # The executor's re-check (runtime/sql/approval_check.sql) leaves the package stale
    # with its reason, and its audit row with each change, before and after.
    Approval.objects.filter(id=world.approval.id).update(
        state=states.STALE,
        decided_by="user:dave",
        decided_at=timezone.now(),
        checked_at=timezone.now(),
        stale_reason="the context changed: precondition",
    )
    audit_append(
        actor="agent:t.steps",
        tenant="acme",
        kind=AuditKind.APPROVAL_STALE,
        task_id=world.blocked.id,
        data={
            "approval_id": str(world.approval.id),
            "reason": "the context changed: precondition",
            "changed": {"precondition": {"before": "v1", "after": "v2"}},
        },
    )
    page = as_person(world.people.bob).get(f"/approvals/{world.approval.id}/").content.decode()
    assert 'id="changed"' in page and "What changed since the agent asked" in page
    assert (
        '<div id="changed-precondition"><dt>The target as the agent read it <code class="key">precondition</code></dt>'
        '<dd class="mono small">v1 → v2</dd></div>'
    ) in page


def test_the_starter_is_refused_approving_their_own_request(world, as_person):
    response = as_person(world.people.alice).post(f"/approvals/{world.approval.id}/approve/", {})
    assert response.status_code == 403 and "SELF_APPROVAL_REFUSED" in response.content.decode()
    assert Approval.objects.get(id=world.approval.id).state == states.PENDING


def test_the_dashboard_counts_pending_and_soon_to_expire(world, as_person):
    body = as_person(world.people.bob).get("/").content.decode()
    assert "1 approval waiting" in body and "1 expiring within the hour" not in body
    Approval.objects.filter(id=world.approval.id).update(expires_at=timezone.now() + timedelta(minutes=5))
    assert "1 expiring within the hour" in as_person(world.people.bob).get("/").content.decode()


def _another_request(world, **fields) -> Approval:
    """A second request of `blocked`, made after the inbox's snapshot (its id is newer)."""
    made = {f.attname: getattr(world.approval, f.attname) for f in Approval._meta.concrete_fields}
    made.update(id=uuid7(), seq=world.approval.seq + 1, name="pay-2", requested_at=timezone.now(), **fields)
    return Approval.objects.create(**made)


def _live(client, query: str):
    return client.get(f"/approvals/live/?{query}", headers={"HX-Request": "true"})


def test_the_inbox_page_keeps_a_room_for_new_requests_and_watches_only_rows_that_may_change(world, as_person):
    decided = _another_request(world, state=states.DENIED, decided_by="user:dave", decided_at=timezone.now())
    body = as_person(world.people.bob).get("/approvals/?state=any").content.decode()
    assert 'id="approvals-live" class="live-bar room"' in body
    assert f"snapshot={decided.id}" in body  # the newest request shown
    assert f'name="row" value="{world.approval.id}.pending"' in body
    assert f'value="{decided.id}.' not in body  # denied is final: never asked about again
    row = body[body.index(f'id="approval-{decided.id}"') :].split("</tr>")[0]
    assert "denied</span>" in row and "by user:dave" in row  # words, and no colour: nothing to act on
    assert 'class="state act"' not in row and "act-text" not in row
    pending = body[body.index(f'id="approval-{world.approval.id}"') :].split("</tr>")[0]
    assert 'class="state act"' in pending and "op: pay" in pending and "amount: 10" in pending  # the action


def test_the_inbox_poll_answers_204_until_a_request_arrives_then_counts_it_without_listing_it(world, as_person):
    client = as_person(world.people.bob)
    watching = f"snapshot={world.approval.id}&row={world.approval.id}.pending&newer=0"
    assert _live(client, watching).status_code == 204
    arrived = _another_request(world)
    answer = _live(client, watching)
    html = answer.content.decode()
    assert answer.status_code == 200 and ">1 new — show</a>" in html and 'value="1"' in html
    assert str(arrived.id) not in html and f"approval-{world.approval.id}" not in html  # announced, not inserted
    assert _live(client, watching.replace("newer=0", "newer=1")).status_code == 204
    # Another agent's request is not new to an inbox filtered by agent.
    assert _live(client, f"agent=other&{watching}").status_code == 204


def test_a_decided_request_is_swapped_in_place_with_its_new_words_even_under_state_pending(world, as_person):
    client = as_person(world.people.bob)
    Approval.objects.filter(id=world.approval.id).update(
        state=states.APPROVED, decided_by="user:dave", decided_at=timezone.now()
    )
    answer = _live(client, f"state=pending&snapshot={world.approval.id}&row={world.approval.id}.pending&newer=0")
    html = answer.content.decode()
    assert answer.status_code == 200
    assert f'<template>\n<tr id="approval-{world.approval.id}" data-state="approved" hx-swap-oob="morph">' in html
    assert f'name="row" value="{world.approval.id}.approved"' in html and "by user:dave" in html
    assert "new — show" not in html and f"{world.approval.name}: approved" in html  # said in the live region
    # Approved, it is still watched: consumed, then nothing more.
    Approval.objects.filter(id=world.approval.id).update(state=states.CONSUMED)
    html = _live(client, f"snapshot={world.approval.id}&row={world.approval.id}.approved").content.decode()
    assert 'data-state="consumed"' in html and 'name="row"' not in html


def test_the_inbox_poll_refuses_a_malformed_snapshot_or_state_with_400(world, as_person):
    client = as_person(world.people.bob)
    answer = _live(client, "snapshot=nope")
    assert answer.status_code == 400 and answer.content.decode().startswith("INVALID_INPUT")
    assert _live(client, f"state=bogus&snapshot={world.approval.id}").status_code == 400
    # A row id that is not a request of the tenant is no row of this page: left alone.
    assert (
        _live(client, f"snapshot={world.approval.id}&row=garbage.pending&row={world.other.id}.pending").status_code
        == 204
    )
