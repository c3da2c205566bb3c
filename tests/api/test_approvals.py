"""The approvals API: list, detail, approve, deny. Who may decide (an operator or an
admin of the tenant, never the task's own starter, never a viewer, a read token or an
agent's capability token), and hostile ids and bodies, each a 4xx with a stable code."""

from __future__ import annotations

import pytest

from runtime import states
from runtime.authz.services import grant_create
from runtime.authz.tokens import token_mint
from runtime.models import Approval, Task
from tests.api.conftest import Api, assert_error
from tests.runtime.approvals.test_approvals import sent, world
from tests.runtime.inprocess import run, submit


@pytest.fixture
def pending(live, people):
    sent.clear()
    world.update(amount=10, etag="v1")
    task_id = submit("approvals.pay", {"memo": "invoice 9"})  # started by alice
    run()
    return Approval.objects.get(task_id=task_id, state=states.PENDING)


@pytest.fixture
def dave(tokens) -> Api:
    return Api(tokens.dave)


def test_the_inbox_lists_pending_requests_and_shows_one(pending, alice):
    listed = alice.get("approvals").json()
    assert [a["id"] for a in listed] == [str(pending.id)]
    shown = alice.get(f"approvals/{pending.id}").json()
    assert shown["action"] == {"op": "pay", "to": "acme-supplies", "amount": 10, "memo": "invoice 9"}
    assert shown["owner"] == "user:alice" and shown["state"] == "pending" and shown["untrusted"] is False
    assert set(shown["context"]) >= {"input_digest", "precondition", "policy_version", "authz_revision"}
    assert alice.get("approvals", order="expiry", state="approved").json() == []


def test_state_any_lists_every_state_as_the_console_does(pending, alice, client, people):
    """The console's inbox took ?state=any; the API answered it 422."""
    alice.post(f"approvals/{pending.id}/deny", {"comment": "no"})
    assert alice.get("approvals").json() == []  # pending, by default
    assert [(a["id"], a["state"]) for a in alice.get("approvals", state="any").json()] == [(str(pending.id), "denied")]
    client.force_login(people.alice)
    assert str(pending.id) in client.get("/approvals/", {"state": "any"}).content.decode()


def test_an_admin_approves_and_the_task_resumes_once(pending, dave):
    response = dave.post(f"approvals/{pending.id}/approve", {"comment": "looks right"})
    assert response.status_code == 200, response.content
    assert response.json()["decided_by"] == "user:dave" and response.json()["comment"] == "looks right"
    assert Task.objects.get(id=pending.task_id).status == states.QUEUED
    run()
    assert Task.objects.get(id=pending.task_id).status == states.COMPLETED
    assert sent["pay"] == 1
    assert_error(dave.post(f"approvals/{pending.id}/deny", {}), 409, "APPROVAL_ALREADY_DECIDED")


def test_an_approve_after_a_grant_change_is_409_approval_stale_naming_it_before_and_after(pending, dave):
    before = pending.context["authz_revision"]
    grant_create(tenant="acme", principal="user:alice", action="note.write", resource="note:x", actor="user:dave")
    response = dave.post(f"approvals/{pending.id}/approve", {"comment": "looks right"})
    assert_error(response, 409, "APPROVAL_STALE")
    details = response.json()["details"]
    assert details["changed"] == {"authz_revision": {"before": before, "after": before + 1}}
    assert details["state"] == "stale"
    shown = dave.get(f"approvals/{pending.id}").json()
    assert (shown["state"], shown["stale_reason"]) == (
        "stale",
        f"the context changed: authz_revision {before} → {before + 1}",
    )
    run()
    assert Task.objects.get(id=pending.task_id).output["outcome"] == "stale"
    assert sent["pay"] == 0


def test_the_starter_cannot_approve_but_may_deny(pending, alice):
    assert_error(alice.post(f"approvals/{pending.id}/approve", {}), 403, "SELF_APPROVAL_REFUSED")
    assert alice.post(f"approvals/{pending.id}/deny", {"comment": "changed my mind"}).json()["state"] == "denied"


def test_a_viewer_and_a_read_token_cannot_decide(pending, tokens):
    for secret in (tokens.bob, tokens.alice_read):
        assert_error(Api(secret).post(f"approvals/{pending.id}/approve", {}), 403, "FORBIDDEN")
    assert Approval.objects.get(id=pending.id).state == states.PENDING


def test_an_agents_capability_token_is_no_credential_here(pending):
    agent_token = token_mint(task=pending.task_id, audience="gateway")
    assert_error(Api(agent_token).post(f"approvals/{pending.id}/approve", {}), 401)
    assert Approval.objects.get(id=pending.id).state == states.PENDING


def test_another_tenants_request_is_not_found(pending, carol):
    assert_error(carol.get(f"approvals/{pending.id}"), 404, "APPROVAL_NOT_FOUND")
    assert_error(carol.post(f"approvals/{pending.id}/approve", {}), 404, "APPROVAL_NOT_FOUND")


# (name, path suffix, body, status, code)
HOSTILE = [
    ("unknown-id", "00000000-0000-7000-8000-000000000000/approve", {}, 404, "APPROVAL_NOT_FOUND"),
    ("not-a-uuid", "nope/approve", {}, 404, "APPROVAL_NOT_FOUND"),
    ("sql-in-id", "1%27%20OR%20%271%27=%271/approve", {}, 404, "APPROVAL_NOT_FOUND"),
    ("huge-id", "9" * 5000 + "/approve", {}, 404, "APPROVAL_NOT_FOUND"),
    ("comment-too-long", "{id}/approve", {"comment": "x" * 2001}, 422, None),
    ("comment-not-text", "{id}/approve", {"comment": ["x"]}, 422, None),
    ("nul-in-comment", "{id}/deny", {"comment": "a\u0000b"}, 422, "INVALID_STRING"),
    ("get-on-approve", "{id}/approve", None, 405, None),
]


@pytest.mark.parametrize("name, suffix, body, status, code", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_requests_are_refused_with_a_stable_code(pending, dave, name, suffix, body, status, code):
    path = f"approvals/{suffix.format(id=pending.id)}"
    response = dave.get(path) if body is None else dave.post(path, body)
    assert_error(response, status, code)
    assert Approval.objects.get(id=pending.id).state == states.PENDING


@pytest.mark.parametrize("query", [{"state": "bogus"}, {"order": "random"}, {"limit": 0}, {"limit": 501}])
def test_hostile_filters_are_refused(pending, alice, query):
    assert_error(alice.get("approvals", **query), 422)


def _operator(username: str):
    from django.contrib.auth import get_user_model

    from console.models import OPERATOR, Membership

    user = get_user_model().objects.create_user(username, f"{username}@example.com", "pw")
    Membership.objects.create(user=user, tenant_id="acme", role=OPERATOR)
    return user


def _token(user) -> Api:
    from console.access import Principal, token_create
    from console.models import OPERATE, OPERATOR

    principal = Principal(
        user=user, tenant="acme", role=OPERATOR, channel="api", scope=OPERATE, credential="test:setup"
    )
    return Api(token_create(principal=principal, name="t", scope=OPERATE).secret)


def test_any_operator_approves_until_an_admin_names_approvers_for_the_agent(pending, dave):
    from guardian.shortcuts import assign_perm

    from console.models import APPROVE_AGENT_REQUESTS, AgentIdentity

    erin, frank = _operator("erin"), _operator("frank")
    identity = AgentIdentity.objects.create(tenant_id="acme", name="approvals.pay")
    assign_perm(f"console.{APPROVE_AGENT_REQUESTS}", frank, identity)
    assert_error(_token(erin).post(f"approvals/{pending.id}/approve", {}), 403, "FORBIDDEN")
    assert Approval.objects.get(id=pending.id).state == states.PENDING
    assert _token(frank).post(f"approvals/{pending.id}/approve", {}).json()["decided_by"] == "user:frank"


def test_with_no_approvers_named_any_operator_of_the_tenant_decides(pending):
    assert _token(_operator("erin")).post(f"approvals/{pending.id}/deny", {}).json()["state"] == "denied"
