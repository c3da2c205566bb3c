"""Every route, table-driven: no token, a revoked or expired token, a read token on an
action, a viewer, another tenant's object; and every action's audit row names the api
channel and the token that carried it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from console.models import OPERATE, ApiToken
from runtime.errors import Forbidden
from runtime.models import AuditEvent, Effect, Task
from tests.api.conftest import Api, assert_error, make_token, revoke
from tests.api.world import make_world

# (method, path, body, is an action, names an object of acme and the code for "not found")
ROUTES = [
    ("GET", "tasks", None, False, None),
    ("POST", "tasks", {"agent": "t.steps", "input": {"n": 1}}, True, None),
    ("GET", "tasks/{task}", None, False, "TASK_NOT_FOUND"),
    ("GET", "tasks/{task}/steps", None, False, "TASK_NOT_FOUND"),
    ("GET", "tasks/{task}/attempts", None, False, "TASK_NOT_FOUND"),
    ("GET", "tasks/{task}/effects", None, False, "TASK_NOT_FOUND"),
    ("GET", "tasks/{task}/children", None, False, "TASK_NOT_FOUND"),
    ("GET", "tasks/{task}/audit", None, False, "TASK_NOT_FOUND"),
    ("POST", "tasks/{task}/cancel", {"reason": "not needed"}, True, "TASK_NOT_FOUND"),
    ("POST", "tasks/{failed}/resume", {"note": "again"}, True, "TASK_NOT_FOUND"),
    ("POST", "tasks/{task}/stop", {"reason": "not needed"}, True, "TASK_NOT_FOUND"),
    ("GET", "tasks/{task}/stop-preview", None, False, "TASK_NOT_FOUND"),
    ("GET", "tasks/{stopped}/stop-summary", None, False, "TASK_NOT_FOUND"),
    ("GET", "stops/{stop}", None, False, "STOP_NOT_FOUND"),
    ("POST", "tasks/{stopped}/rerun", {"reason": "fixed its input"}, True, "TASK_NOT_FOUND"),
    ("GET", "agents/t.steps/switch", None, False, None),
    ("GET", "agents/t.steps/stop-preview", None, False, None),
    ("POST", "agents/t.steps/stop", {"reason": "incident"}, True, None),
    ("POST", "agents/t.crashes/reopen", {"reason": "fixed"}, True, None),
    ("GET", "agents", None, False, None),
    ("GET", "agents/t.steps", None, False, None),
    ("GET", "effects", None, False, None),
    ("GET", "effects/{effect}", None, False, "EFFECT_NOT_FOUND"),
    ("POST", "effects/{effect}/resolve", {"outcome": "failed", "note": "it did not"}, True, "EFFECT_NOT_FOUND"),
    ("GET", "pools", None, False, None),
    ("PATCH", "pools/default", {"max_queued": 9000}, True, None),
    ("GET", "audit", None, False, None),
    ("GET", "audit/export", None, False, None),
    ("POST", "audit/verify", None, False, None),  # a POST that only reads: every member may verify
    ("GET", "audit/{event}", None, False, "AUDIT_EVENT_NOT_FOUND"),
    ("GET", "tokens", None, False, None),
    ("POST", "tokens", {"name": "ci", "scope": "read"}, True, None),
    ("POST", "tokens/{token}/revoke", None, True, "TOKEN_NOT_FOUND"),
    ("DELETE", "tokens/{token}", None, True, "TOKEN_NOT_FOUND"),
    ("GET", "members", None, False, None),
    ("PUT", "members/bob", {"role": "operator", "reason": "on call"}, True, None),  # adds: nothing to find
    ("DELETE", "members/bob", None, True, "MEMBER_NOT_FOUND"),
    ("GET", "grants", None, False, None),
    (
        "POST",
        "grants",
        {"principal": "agent:t.steps", "action": "tool.search", "resource": "repo:acme/docs"},
        True,
        None,
    ),
    ("GET", "grants/{grant}", None, False, "GRANT_NOT_FOUND"),
    ("GET", "grants/{grant}/preview", None, False, "GRANT_NOT_FOUND"),
    ("POST", "grants/{grant}/narrow", {"resource": "repo:acme/docs", "reason": "docs only"}, True, "GRANT_NOT_FOUND"),
    ("POST", "grants/{grant}/revoke", {"reason": "rotating"}, True, "GRANT_NOT_FOUND"),
    ("GET", "decisions", None, False, None),
    ("GET", "agent-identities", None, False, None),
    ("GET", "schedules", None, False, None),
    ("POST", "schedules", {"name": "hourly", "agent": "t.steps", "cron": "0 * * * *"}, True, None),
    ("GET", "schedules/{schedule}", None, False, "SCHEDULE_NOT_FOUND"),
    ("POST", "schedules/{schedule}/pause", None, True, "SCHEDULE_NOT_FOUND"),
    ("GET", "webhooks", None, False, None),
    ("POST", "webhooks", {"name": "ci", "agent": "t.steps"}, True, None),
    ("GET", "webhooks/{webhook}", None, False, "WEBHOOK_NOT_FOUND"),
    ("GET", "webhooks/{webhook}/deliveries", None, False, "WEBHOOK_NOT_FOUND"),
    ("POST", "webhooks/{webhook}/pause", None, True, "WEBHOOK_NOT_FOUND"),
    ("GET", "dependencies", None, False, None),
    ("POST", "dependencies", {"agent": "t.steps", "prerequisites": ["{task}"]}, True, None),
    ("GET", "dependencies/{dependency}", None, False, "TRIGGER_NOT_FOUND"),
]
ACTIONS = [r for r in ROUTES if r[3]]
# Administering (members): an admin's operate token; an operator's is FORBIDDEN too.
ADMINISTERS = [r for r in ACTIONS if r[1].startswith("members")]
OBJECTS = [r for r in ROUTES if r[4]]


def ids(routes):
    return [f"{method} {path}" for method, path, *_ in routes]


@pytest.fixture
def world(tokens):
    return make_world(tokens)


def call(api: Api, world, method, path, body):
    if isinstance(body, dict):  # a body naming an object: {"prerequisites": ["{task}"]}
        body = {k: [world.fill(v) for v in value] if isinstance(value, list) else value for k, value in body.items()}
    return api.call(method, world.fill(path), body)


@pytest.mark.parametrize("method,path,body,action,missing", ROUTES, ids=ids(ROUTES))
def test_every_route_refuses_a_request_without_a_token(world, method, path, body, action, missing):
    assert_error(call(Api(None), world, method, path, body), 401, "AUTH_REQUIRED")


@pytest.mark.parametrize("method,path,body,action,missing", ROUTES, ids=ids(ROUTES))
def test_every_route_refuses_a_revoked_token_at_once(people, world, method, path, body, action, missing):
    secret = make_token(people.alice, name="soon revoked")
    assert Api(secret).get("tasks").status_code == 200
    revoke(people.alice, secret)
    assert_error(call(Api(secret), world, method, path, body), 401, "AUTH_REQUIRED")


@pytest.mark.parametrize("method,path,body,action,missing", ROUTES, ids=ids(ROUTES))
def test_every_route_refuses_an_expired_token(people, world, method, path, body, action, missing):
    secret = make_token(people.alice, name="short", expires_at=timezone.now() + timedelta(hours=1))
    ApiToken.objects.filter(prefix=secret[:12]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert_error(call(Api(secret), world, method, path, body), 401, "AUTH_REQUIRED")


@pytest.mark.parametrize(
    "header",
    [
        "Bearer",
        "Bearer ",
        "Basic YWxpY2U6cGFzcw==",
        "Bearer stw_not-a-real-one",
        "Bearer " + "x" * 5000,
        "bearer stw_x",
        "Bearer stw_\u00e9",
    ],
)
def test_a_malformed_or_unknown_authorization_header_is_401(db, header):
    response = Api(None).call("GET", "tasks", headers={"Authorization": header})
    assert_error(response, 401, "AUTH_REQUIRED")


@pytest.mark.parametrize("method,path,body,action,missing", ACTIONS, ids=ids(ACTIONS))
def test_a_read_token_is_forbidden_every_action_and_changes_nothing(tokens, world, method, path, body, action, missing):
    before = AuditEvent.objects.count()
    assert_error(call(Api(tokens.alice_read), world, method, path, body), 403, "FORBIDDEN")
    assert AuditEvent.objects.count() == before


@pytest.mark.parametrize("method,path,body,action,missing", ACTIONS, ids=ids(ACTIONS))
def test_a_viewer_is_forbidden_every_action(tokens, world, method, path, body, action, missing):
    assert_error(call(Api(tokens.bob), world, method, path, body), 403, "FORBIDDEN")


def test_a_viewer_can_get_no_operate_token_either_way(people, tokens):
    with pytest.raises(Forbidden):
        make_token(people.bob, scope=OPERATE)
    assert_error(Api(tokens.bob).post("tokens", {"name": "mine", "scope": "operate"}), 403, "FORBIDDEN")


@pytest.mark.parametrize(
    "method,path,body,action,missing", [r for r in ROUTES if not r[3]], ids=ids([r for r in ROUTES if not r[3]])
)
def test_a_viewer_reads_every_route(tokens, world, method, path, body, action, missing):
    response = call(Api(tokens.bob), world, method, path, body)
    assert response.status_code == 200, response.content[:300]


@pytest.mark.parametrize("method,path,body,action,missing", OBJECTS, ids=ids(OBJECTS))
def test_another_tenants_object_is_not_found_and_left_alone(carol, world, method, path, body, action, missing):
    assert_error(call(carol, world, method, path, body), 404, missing)
    world.task.refresh_from_db(), world.effect.refresh_from_db(), world.token.refresh_from_db()
    assert (world.task.status, world.effect.state, world.token.revoked_at) == ("queued", "unknown", None)
    world.grant.refresh_from_db()
    assert (world.grant.resource, world.grant.revoked_at) == ("repo:acme/*", None)


def test_another_tenants_lists_hold_none_of_ours(carol, world):
    for path in ("tasks", "effects", "audit"):
        body = carol.get(path).json()
        assert all(item.get("tenant", "globex") == "globex" for item in body["items"]), (path, body)
        assert str(world.task.id) not in str(body)
    # A filter naming our task is refused as our task's own page is (test_filters.py).
    assert_error(carol.get("tasks", parent=str(world.task.id)), 404, "TASK_NOT_FOUND")


@pytest.mark.parametrize("method,path,body,action,missing", ACTIONS, ids=ids(ACTIONS))
def test_every_action_writes_its_audit_rows_with_the_api_channel_and_the_token(
    tokens, world, method, path, body, action, missing
):
    person, secret = ("dave", tokens.dave) if path.startswith("members") else ("alice", tokens.alice)
    before = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first()
    response = call(Api(secret), world, method, path, body)
    assert response.status_code in (200, 201), response.content[:300]
    written = list(AuditEvent.objects.filter(id__gt=before).exclude(kind="pool.created"))
    assert written, "an action must leave an audit row"
    for event in written:
        assert event.actor == f"user:{person}", event
        assert event.data["via"] == {"channel": "api", "credential": f"token:{secret[:12]}"}, event.data


@pytest.mark.parametrize("method,path,body,action,missing", ADMINISTERS, ids=ids(ADMINISTERS))
def test_an_operator_is_forbidden_every_administration_and_changes_nothing(
    tokens, world, method, path, body, action, missing
):
    before = AuditEvent.objects.count()
    assert_error(call(Api(tokens.alice), world, method, path, body), 403, "FORBIDDEN")
    assert AuditEvent.objects.count() == before


def test_resolving_an_effect_unblocks_its_task(alice, world):
    response = alice.post(f"effects/{world.effect.id}/resolve", {"outcome": "committed", "receipt": {"id": 7}})
    assert response.json()["state"] == "committed" and response.json()["receipt"] == {"id": 7}
    assert Task.objects.get(id=world.blocked.id).status == "queued"
    again = alice.post(f"effects/{world.effect.id}/resolve", {"outcome": "failed"})
    assert_error(again, 409, "INVALID_TRANSITION")
    assert Effect.objects.get(id=world.effect.id).state == "committed"


def test_a_token_request_needs_no_csrf_token_and_a_session_cookie_alone_is_no_credential(people, tokens, world):
    """The API authenticates by token only: Django's CSRF check (which protects cookie
    sessions) does not stand in a token client's way, and a signed-in browser's session
    cookie does not authenticate an API call, so a cross-site form cannot act."""
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    made = strict.post(
        "/api/v1/tasks",
        {"agent": "t.steps"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {tokens.alice}"},
    )
    assert made.status_code == 201, made.content[:300]
    strict.force_login(people.alice)
    assert_error(
        strict.post("/api/v1/tasks", {"agent": "t.steps"}, content_type="application/json"), 401, "AUTH_REQUIRED"
    )
