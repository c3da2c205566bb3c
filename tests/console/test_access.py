"""Access across every console route (console/ui/urls.py ROUTES, so a new route is
covered or this fails): a stranger is sent to sign in (401 for a fragment), carol of
globex finds no acme object (404, never 403, pages and fragments alike), bob the viewer
is refused every action (403, even with a crafted POST) and nothing changes."""

from __future__ import annotations

import pytest

from console.access import session_principal, token_create
from console.models import ApiToken, Membership
from console.ui.urls import ROUTES
from runtime.authz.services import authorize, grant_create
from runtime.models import (
    Approval,
    AuditEvent,
    Effect,
    ErasureReceipt,
    Grant,
    MemoryRecord,
    Schedule,
    Task,
    Webhook,
)
from runtime.stops.services import task_stop
from runtime.triggers.services import schedule_create, webhook_create
from tests.console.world import World, submit

BY_NAME = {r.name: r for r in ROUTES}

# Each route's URL pointing at acme's objects, and what a POST to it carries.
ACME_URLS = {
    "login": "/login/",
    "logout": "/logout/",
    "tenant": "/tenant/",
    "dashboard": "/",
    "dashboard-live": "/live/",
    "tasks": "/tasks/",
    "tasks-live": "/tasks/live/?row={parent}.queued&row={blocked}.queued",
    "task-new": "/tasks/new/",
    "task": "/tasks/{parent}/",
    "task-live": "/tasks/{parent}/live/",
    "task-steps": "/tasks/{parent}/steps/",
    "task-step": "/tasks/{parent}/steps/1/",
    "task-cancel": "/tasks/{parent}/cancel/",
    "task-resume": "/tasks/{done}/resume/",
    "task-stop": "/tasks/{parent}/stop/",
    "task-rerun": "/tasks/{stopped}/rerun/",
    "task-upgrade": "/tasks/{parent}/upgrade/",
    "stop": "/stops/{stop}/",
    "stop-panel": "/stops/{stop}/panel/",
    "agent-stop": "/agents/t.steps/stop/",
    "agent-reopen": "/agents/t.steps/reopen/",
    "agent-memory": "/agents/t.steps/memory/",
    "memory-record": "/agents/t.steps/memory/note/acme/",
    "effects": "/effects/",
    "effect": "/effects/{effect}/",
    "effect-resolve": "/effects/{effect}/resolve/",
    "approvals": "/approvals/",
    "approvals-live": "/approvals/live/?row={approval}.pending&snapshot=00000000-0000-0000-0000-000000000000",
    "approval": "/approvals/{approval}/",
    "approval-approve": "/approvals/{approval}/approve/",
    "approval-deny": "/approvals/{approval}/deny/",
    "pools": "/pools/",
    "pool": "/pools/default/",
    "pool-limits": "/pools/default/limits/",
    "budgets": "/budgets/",
    "budget-set": "/budgets/set/",
    "audit": "/audit/",
    "audit-verify": "/audit/verify/",
    "audit-export": "/audit/export.jsonl",
    "audit-seals": "/audit/seals.jsonl",
    "retention": "/retention/",
    "retention-set": "/retention/set/",
    "erasures": "/erasures/",
    "erasure-new": "/erasures/new/",
    "erasure": "/erasures/{erasure}/",
    "audit-event": "/audit/{audit}/",
    "tokens": "/tokens/",
    "token-new": "/tokens/new/",
    "token-revoke": "/tokens/{token}/revoke/",
    "members": "/members/",
    "member-add": "/members/add/",
    "member-role": "/members/bob/role/?role=operator",
    "member-remove": "/members/bob/remove/",
    "agents": "/agents/",
    "agent": "/agents/t.steps/",
    "agent-stewards": "/agents/t.steps/stewards/",
    "grants": "/grants/",
    "grant-new": "/grants/new/",
    "grant": "/grants/{grant}/",
    "grant-revoke": "/grants/{grant}/revoke/",
    "grant-narrow": "/grants/{grant}/narrow/",
    "owner": "/owners/alice/",
    "decisions": "/decisions/",
    "decision": "/decisions/{decision}/",
    "schedules": "/schedules/",
    "schedule-new": "/schedules/new/",
    "schedule": "/schedules/{schedule}/",
    "schedule-pause": "/schedules/{schedule}/pause/",
    "schedule-resume": "/schedules/{schedule}/resume/",
    "dependencies": "/dependencies/",
    "webhooks": "/webhooks/",
    "webhook-new": "/webhooks/new/",
    "webhook": "/webhooks/{webhook}/",
    "webhook-pause": "/webhooks/{webhook}/pause/",
    "webhook-resume": "/webhooks/{webhook}/resume/",
}
POSTS = {
    "task-new": {"agent": "t.steps", "input": '{"n": 1}'},
    "task-cancel": {"reason": "crafted"},
    "task-resume": {"reason": "crafted"},
    "task-stop": {"reason": "crafted"},
    "task-rerun": {"reason": "crafted"},
    "task-upgrade": {},
    "agent-stop": {"reason": "crafted"},
    "agent-reopen": {"reason": "crafted"},
    "effect-resolve": {"outcome": "committed", "receipt": '{"ref": 1}', "note": "crafted"},
    "approval-approve": {"comment": "crafted"},
    "approval-deny": {"comment": "crafted"},
    "pool-limits": {"max_running": "7", "max_queued": "70"},
    "budget-set": {"task_tokens": "1"},
    "retention-set": {"task_days": "1", "reason": "crafted"},
    "erasure-new": {"kind": "tenant", "reason": "crafted", "confirm": "1"},
    "token-new": {"name": "crafted", "scope": "read"},
    "token-revoke": {},
    "member-add": {"username": "carol", "role": "admin"},
    "member-role": {"role": "admin", "reason": "crafted"},
    "member-remove": {"reason": "crafted"},
    "agent-stewards": {"username": "alice", "allow": "yes"},
    "grant-new": {"principal": "agent:t.steps", "action": "tool.search", "resource": "repo:*"},
    "grant-revoke": {"reason": "crafted"},
    "grant-narrow": {"resource": "repo:acme/x", "reason": "crafted"},
    "schedule-new": {"name": "crafted", "agent": "t.steps", "cron": "* * * * *"},
    "schedule-pause": {},
    "schedule-resume": {},
    "webhook-new": {"name": "crafted", "agent": "t.steps"},
    "webhook-pause": {},
    "webhook-resume": {},
}
ACME_ROLES = {"alice": "operator", "bob": "viewer", "dave": "admin"}
# A viewer makes and revokes his own read tokens (docs/api.md): what he is refused is a
# wider one, and another person's token, which he cannot see.
VIEWER_REFUSED = {"token-new": ({"name": "crafted", "scope": "operate"}, 403), "token-revoke": ({}, 404)}
POST_ONLY = {"logout", "tenant", "audit-verify", "token-new", "member-add", "schedule-new", "webhook-new"}


@pytest.fixture
def acme(world: World):
    token = token_create(principal=_principal(world.people.alice), name="ci", scope="read").token
    grant = grant_create(
        tenant="acme", principal="agent:t.steps", action="tool.search", resource="repo:acme/*", actor="user:dave"
    )
    decision = authorize(task=world.parent.id, action="tool.search", resource="repo:acme/x", boundary="worker")
    stopped = submit("acme", "alice", n=9)
    stop = task_stop(task_id=stopped.id, actor="user:alice", reason="a stop to point at").stop_id
    schedule = schedule_create(
        tenant="acme",
        name="nightly",
        agent="t.steps",
        input={},
        owner="user:alice",
        cron="0 3 * * *",
        actor="user:alice",
    )
    webhook, _ = webhook_create(tenant="acme", name="gh", agent="t.steps", owner="user:alice", actor="user:alice")
    MemoryRecord.objects.create(
        tenant="acme",
        agent="t.steps",
        kind="note",
        key="acme",
        version=1,
        schema_version=1,
        payload={"text": "x"},
        payload_hash="0" * 64,
        change="write",
        source="person",
        untrusted=False,
        actor="user:alice",
    )
    ids = {
        "parent": world.parent.id,
        "blocked": world.blocked.id,
        "done": world.done.id,
        "effect": world.effect.id,
        "audit": world.audit.id,
        "token": token.id,
        "grant": grant.id,
        "decision": decision.id,
        "stop": stop,
        "stopped": stopped.id,
        "approval": world.approval.id,
        "schedule": schedule.id,
        "webhook": webhook.id,
        "erasure": ErasureReceipt.objects.create(
            tenant="acme",
            subject_kind="task",
            subject="x",
            actor="user:alice",
            reason="r",
            rows=0,
            body={},
            key_id="k",
            mac=b"m",
        ).id,
    }
    return {name: url.format(**ids) for name, url in ACME_URLS.items()}


def _principal(user):
    class Request:
        session = {}

    request = Request()
    request.user = user
    request.session = type("S", (dict,), {"session_key": "test"})()
    return session_principal(request)


def test_the_table_names_every_route():
    assert set(ACME_URLS) == set(BY_NAME)
    assert set(POSTS) == {r.name for r in ROUTES if r.action}


def test_a_stranger_is_sent_to_sign_in_from_every_page_and_gets_401_from_every_fragment(client, acme):
    for route in ROUTES:
        if route.public:
            continue
        url = acme[route.name]
        if route.fragment:
            response = client.get(url, headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/tasks/"})
            assert response.status_code == 401, route.name
            assert response["HX-Redirect"] == "/login/?next=%2Ftasks%2F", route.name  # htmx goes to sign in
            continue
        response = (
            client.post(url, POSTS.get(route.name, {}))
            if (route.action or route.name in POST_ONLY)
            else client.get(url)
        )
        assert response.status_code == 302, (route.name, response.status_code)
        assert response["Location"].startswith("/login/"), route.name


def test_a_stranger_gets_401_from_any_page_asked_for_by_htmx(client, acme):
    for route in ROUTES:
        if not route.public and route.name not in POST_ONLY and not route.action:
            assert client.get(acme[route.name], headers={"HX-Request": "true"}).status_code == 401, route.name


def test_carol_finds_no_acme_object_on_any_route_page_or_fragment(world, as_person, acme):
    client = as_person(world.people.carol)
    for route in ROUTES:
        # Lists show globex's own rows; pools are fleet-wide; agents are registered fleet-wide
        # and each tenant sees its own grants of them (tests/console/test_grant_screens.py).
        if route.object in ("", "pool", "agent"):
            continue
        url = acme[route.name]
        for htmx in (False, True):
            headers = {"HX-Request": "true"} if htmx else {}
            response = client.get(url, headers=headers)
            assert response.status_code in (404, 405), (route.name, htmx, response.status_code)
            if route.action:
                response = client.post(url, POSTS[route.name], headers=headers)
                assert response.status_code == 404, (route.name, htmx, response.status_code)
    assert Task.objects.get(id=world.parent.id).status == "running"
    assert Effect.objects.get(id=world.effect.id).state == "unknown"
    assert Approval.objects.get(id=world.approval.id).state == "pending"
    assert ApiToken.objects.get(prefix__isnull=False, name="ci").revoked_at is None
    assert _roles() == ACME_ROLES
    assert _grants() == [("repo:acme/*", None)]
    assert list(Schedule.objects.values_list("name", "paused")) == [("nightly", False)]
    assert list(Webhook.objects.values_list("name", "paused")) == [("gh", False)]


def test_carol_sees_none_of_acme_in_lists_and_fragments(world, as_person, acme):
    client = as_person(world.people.carol)
    acme_ids = [str(world.parent.id), str(world.blocked.id), str(world.done.id), str(world.child.id)]
    for name in (
        "dashboard",
        "dashboard-live",
        "tasks",
        "tasks-live",
        "effects",
        "approvals",
        "approvals-live",
        "audit",
        "audit-export",
        "audit-seals",
        "tokens",
        "members",
        "agents",
        "agent",
        "grants",
        "decisions",
    ):
        response = client.get(
            acme[name] + ("&" if "?" in acme[name] else "?") + "state=any",
            headers={"HX-Request": "true"} if BY_NAME[name].fragment else {},
        )
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert response.status_code in (200, 204), name
        for task_id in acme_ids:
            assert task_id.encode() not in body, (name, task_id)
    assert str(world.other.id).encode() in client.get("/tasks/").content
    assert b'id="member-bob"' not in client.get("/members/").content


def test_carol_gets_404_for_an_acme_task_on_the_effects_and_audit_filters(world, as_person):
    client = as_person(world.people.carol)
    assert client.get(f"/effects/?task={world.parent.id}").status_code == 404


def test_bob_is_refused_every_action_even_a_crafted_post_and_nothing_changes(world, as_person, acme):
    client = as_person(world.people.bob)
    before = AuditEvent.objects.count()
    for route in ROUTES:
        if route.action:
            body, status = VIEWER_REFUSED.get(route.name, (POSTS[route.name], 403))
            response = client.post(acme[route.name], body)
            assert response.status_code == status, (route.name, response.status_code)
    assert AuditEvent.objects.count() == before
    assert Task.objects.get(id=world.parent.id).status == "running"
    assert Task.objects.get(id=world.done.id).status == "completed"
    assert Effect.objects.get(id=world.effect.id).state == "unknown"
    assert Approval.objects.get(id=world.approval.id).state == "pending"
    assert not ApiToken.objects.filter(name="crafted").exists()
    assert ApiToken.objects.get(name="ci").revoked_at is None
    assert _roles() == ACME_ROLES
    assert _grants() == [("repo:acme/*", None)]


def test_bob_is_refused_the_member_confirmation_pages_too(world, as_person, acme):
    client = as_person(world.people.bob)
    for name in ("member-role", "member-remove"):
        assert client.get(acme[name]).status_code == 403, name
        assert client.get(acme[name], headers={"HX-Request": "true"}).status_code == 403, name


def test_bob_sees_no_action_button_or_form_on_any_screen(world, as_person, acme):
    client = as_person(world.people.bob)
    forbidden = [
        b"/cancel/",
        b"/stop/",
        b"/reopen/",
        b"/rerun/",
        b"/resume/",
        b"/resolve/",
        b"/limits/",
        b"/tokens/new/",
        b"/revoke/",
        b"/members/add/",
        b"/role/",
        b"/remove/",
        b"/narrow/",
        b"/grants/new/",
        b"/stewards/",
        b'href="/tasks/new/"',
        b"Submit task",
        b">Resolve<",
        b"/approve/",
        b"/deny/",
    ]
    for route in ROUTES:
        if route.action or route.public or route.name in POST_ONLY or route.name in ("audit-export", "audit-seals"):
            continue
        response = client.get(acme[route.name], headers={"HX-Request": "true"} if route.fragment else {})
        for marker in forbidden:
            if route.name == "tokens" and marker == b"/tokens/new/":
                continue  # his own read tokens: tests/console/test_pools_and_tokens.py
            assert marker not in response.content, (route.name, marker)


def _grants() -> list:
    return list(Grant.objects.order_by("id").values_list("resource", "revoked_at"))


def _roles() -> dict:
    return dict(Membership.objects.filter(tenant_id="acme").values_list("user__username", "role"))
