"""The budgets and quotas API: an operator of the tenant sets them (a viewer, a read token
or a capability token cannot), hostile bodies are a 4xx with a stable code and write
nothing, a stale version is VERSION_CONFLICT, and each tenant sees only its own."""

from __future__ import annotations

import pytest

from runtime.limits.services import budget_set
from runtime.models import AuditEvent, Budget, Quota
from tests.api.conftest import Api, assert_error
from tests.runtime.authz.common import running_task
from tests.runtime.authz.test_tokens import ROUTE
from tests.snapshot import snapshot

# (name, path, body or raw bytes, status, code)
HOSTILE = [
    ("negative", "budgets", {"task_tokens": -1}, 422, "INVALID_REQUEST"),
    ("past the bound", "budgets", {"tree_tokens": 10**15 + 1}, 422, "INVALID_REQUEST"),
    ("huge integer", "budgets", {"tenant_tokens": 10**30}, 422, "INVALID_REQUEST"),
    ("five thousand digits", "budgets", b'{"task_tokens": ' + b"9" * 5000 + b"}", 400, "MALFORMED_JSON"),
    ("float", "budgets", {"task_tokens": 1.5}, 422, "INVALID_REQUEST"),
    ("string", "budgets", {"task_tokens": "100"}, 422, "INVALID_REQUEST"),
    ("bool", "budgets", {"task_tokens": True}, 422, "INVALID_REQUEST"),
    ("list", "budgets", {"task_tokens": [1]}, 422, "INVALID_REQUEST"),
    ("unknown field", "budgets", {"task_tokens": 1, "tenant": "globex"}, 422, "INVALID_REQUEST"),
    ("version negative", "budgets", {"task_tokens": 1, "version": -1}, 422, "INVALID_REQUEST"),
    ("reason too long", "budgets", {"task_tokens": 1, "reason": "x" * 2001}, 422, "INVALID_REQUEST"),
    ("not JSON", "budgets", b"{task_tokens: 1", 400, "MALFORMED_JSON"),
    ("NaN", "budgets", b'{"task_tokens": NaN}', 400, "MALFORMED_JSON"),
    ("not an object", "budgets", [1, 2], 422, "INVALID_REQUEST"),
    ("quota calls negative", "quotas/echo", {"calls": -1, "window_seconds": 60}, 422, "INVALID_REQUEST"),
    ("quota calls string", "quotas/echo", {"calls": "5", "window_seconds": 60}, 422, "INVALID_REQUEST"),
    ("quota window zero", "quotas/echo", {"calls": 5, "window_seconds": 0}, 422, "INVALID_REQUEST"),
    ("quota window a year", "quotas/echo", {"calls": 5, "window_seconds": 31_536_000}, 422, "INVALID_REQUEST"),
    ("quota missing window", "quotas/echo", {"calls": 5}, 422, "INVALID_REQUEST"),
    ("quota service bad", "quotas/Echo%20x", {"calls": 5, "window_seconds": 60}, 422, "INVALID_REQUEST"),
    ("quota service long", "quotas/" + "e" * 100, {"calls": 5, "window_seconds": 60}, 422, "INVALID_REQUEST"),
]


@pytest.mark.parametrize(("name", "path", "body", "status", "code"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_body_is_a_4xx_with_a_stable_code_and_writes_nothing(alice, name, path, body, status, code):
    alice.get("budgets")  # the token's last use is written on its first call: before the snapshot
    before = snapshot()
    raw = body if isinstance(body, bytes) else None
    response = alice.call("PUT", path, None if raw else body, raw=raw)
    assert_error(response, status, code)
    assert snapshot() == before


def test_an_integral_json_number_is_the_integer_the_schema_says_it_is(alice):
    # JSON Schema's "integer" is any number without a fraction: 10.0 and 1e3 are integers to
    # every client generated from the schema (and to schemathesis), so they are to the API.
    response = alice.call("PUT", "budgets", {"task_tokens": 10.0, "tree_tokens": 1e3})
    assert response.status_code == 200, response.content
    assert (response.json()["task_tokens"], response.json()["tree_tokens"]) == (10, 1000)
    assert Budget.objects.get(tenant="acme").task_tokens == 10


def test_an_operator_sets_the_budgets_and_reads_them_back_with_their_use(alice):
    response = alice.call("PUT", "budgets", {"task_tokens": 1000, "tenant_tokens": 0, "reason": "launch"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["tenant"], body["task_tokens"], body["tree_tokens"], body["tenant_tokens"], body["version"]) == (
        "acme",
        1000,
        None,
        0,
        1,
    )
    assert body["tenant_use"] == {"scope": "tenant", "subject": "acme", "used": 0, "limit": 0, "state": "exhausted"}
    event = AuditEvent.objects.get(kind="budget.set")
    assert (event.actor, event.tenant, event.data["via"]["channel"]) == ("user:alice", "acme", "api")
    assert alice.get("budgets").json() == body


def test_a_stale_version_is_a_conflict_and_changes_nothing(alice):
    alice.call("PUT", "budgets", {"task_tokens": 10})
    assert alice.call("PUT", "budgets", {"task_tokens": 20, "version": 1}).status_code == 200
    before = snapshot()
    assert_error(alice.call("PUT", "budgets", {"task_tokens": 30, "version": 1}), 409, "VERSION_CONFLICT")
    assert snapshot() == before
    assert Budget.objects.get(tenant="acme").task_tokens == 20


def test_quotas_are_set_listed_and_removed(alice):
    response = alice.call("PUT", "quotas/echo", {"calls": 5, "window_seconds": 60})
    assert response.status_code == 200, response.content
    assert [q["service"] for q in alice.get("quotas").json()] == ["echo"]
    assert_error(alice.delete("quotas/echo?version=7"), 409, "VERSION_CONFLICT")
    assert alice.delete("quotas/echo?version=1").json()["calls"] == 5
    assert not Quota.objects.exists()
    assert_error(alice.delete("quotas/echo"), 404, "QUOTA_NOT_FOUND")


@pytest.mark.parametrize("who", ["bob", "alice_read"])
def test_a_viewer_or_a_read_token_cannot_change_them(tokens, who):
    api = Api(getattr(tokens, who))
    api.get("budgets")  # the token's last use is written on its first call: before the snapshot
    before = snapshot()
    assert_error(api.call("PUT", "budgets", {"task_tokens": 1}), 403, "FORBIDDEN")
    assert_error(api.call("PUT", "quotas/echo", {"calls": 1, "window_seconds": 1}), 403, "FORBIDDEN")
    assert snapshot() == before


def test_an_agent_s_capability_token_is_not_an_api_token(people):
    from runtime.authz.tokens import token_mint

    t = running_task(tenant="acme")
    before = snapshot()
    api = Api(token_mint(task=t, audience=ROUTE))
    assert_error(api.call("PUT", "budgets", {"task_tokens": 10**15}), 401, "AUTH_REQUIRED")
    assert_error(api.call("PUT", "quotas/echo", {"calls": 10**6, "window_seconds": 1}), 401, "AUTH_REQUIRED")
    assert snapshot() == before


def test_another_tenant_s_budget_is_neither_seen_nor_changed(carol):
    budget_set(tenant="acme", actor="user:dave", task_tokens=5)
    assert carol.get("budgets").json()["task_tokens"] is None
    assert carol.call("PUT", "budgets", {"task_tokens": 99}).status_code == 200
    assert Budget.objects.get(tenant="acme").task_tokens == 5
