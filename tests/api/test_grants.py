"""The grants API: who may change which grant (an admin any, an operator only the agents
they hold the right over, never a person's), hostile bodies refused with a stable code
and nothing written, the preview's count equal to the audit event's, and decisions
filtered."""

from __future__ import annotations

import json

import pytest

from runtime.authz.services import authorize, grant_create
from runtime.models import AuditEvent, Grant
from tests.api.conftest import Api, assert_error
from tests.api.world import make_world
from tests.snapshot import snapshot

OK = {"principal": "agent:t.steps", "action": "tool.search", "resource": "repo:acme/*"}
DEEP = {"principal": "agent:t.steps", "action": "tool.search", "resource": json.loads("[" * 500 + "]" * 500)}

# (name, path, body or raw bytes, status, code)
HOSTILE = [
    ("principal huge", "grants", {**OK, "principal": "agent:" + "x" * 5000}, 422, "INVALID_REQUEST"),
    ("resource huge", "grants", {**OK, "resource": "r" * 100_000}, 422, "INVALID_REQUEST"),
    ("resource deep", "grants", DEEP, 422, "INVALID_REQUEST"),
    ("not JSON", "grants", b"{principal: agent:x", 400, "MALFORMED_JSON"),
    (
        "latin-1 bytes",
        "grants",
        '{"principal": "agent:t.steps", "action": "tool.search", "resource": "r\xe9"}'.encode("latin-1"),
        400,
        "BODY_NOT_UTF8",
    ),
    ("NUL in resource", "grants", {**OK, "resource": "repo:\u0000"}, 422, "INVALID_REQUEST"),
    ("a star mid-pattern", "grants", {**OK, "resource": "repo:*/x"}, 400, "INVALID_RESOURCE_PATTERN"),
    ("principal neither agent nor user", "grants", {**OK, "principal": "task:1"}, 400, "INVALID_IDENTIFIER"),
    ("action not dotted words", "grants", {**OK, "action": "DROP TABLE"}, 400, "INVALID_IDENTIFIER"),
    ("expiry in the past", "grants", {**OK, "expires_at": "2001-01-01T00:00:00Z"}, 400, "ARGUMENT_OUT_OF_RANGE"),
    ("expiry without offset", "grants", {**OK, "expires_at": "2099-01-01T00:00:00"}, 422, "INVALID_REQUEST"),
    ("expiry out of range", "grants", {**OK, "expires_at": "99999-01-01T00:00:00Z"}, 422, "INVALID_REQUEST"),
    ("revoke without reason", "grants/{grant}/revoke", {}, 422, "INVALID_REQUEST"),
    ("revoke with a blank reason", "grants/{grant}/revoke", {"reason": "  "}, 400, "INVALID_ARGUMENT"),
    ("revoke reason huge", "grants/{grant}/revoke", {"reason": "y" * 5000}, 422, "INVALID_REQUEST"),
    ("narrow wider", "grants/{grant}/narrow", {"resource": "repo:*", "reason": "x"}, 400, "GRANT_NOT_NARROWER"),
    ("narrow nothing", "grants/{grant}/narrow", {"reason": "x"}, 400, "INVALID_ARGUMENT"),
    (
        "narrow to the past",
        "grants/{grant}/narrow",
        {"expires_at": "2001-01-01T00:00:00Z", "reason": "x"},
        400,
        "ARGUMENT_OUT_OF_RANGE",
    ),
    ("grant id past 64 bits", f"grants/{2**64}/revoke", {"reason": "x"}, 422, "INVALID_REQUEST"),
    ("grant id zero", "grants/0/revoke", {"reason": "x"}, 422, "INVALID_REQUEST"),
    ("no such grant", f"grants/{2**62}/revoke", {"reason": "x"}, 404, "GRANT_NOT_FOUND"),
]


@pytest.fixture
def world(tokens):
    return make_world(tokens)


@pytest.mark.parametrize(("name", "path", "body", "status", "code"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_grant_request_is_a_4xx_with_its_code_and_writes_nothing(
    tokens, world, name, path, body, status, code
):
    api = Api(tokens.dave)
    url = path.format(grant=world.grant.id)
    api.get("grants")  # the token's last use is written on its first call: before the snapshot
    before = snapshot()
    response = api.post(url, raw=body) if isinstance(body, bytes) else api.post(url, body)
    assert_error(response, status, code)
    assert snapshot() == before


@pytest.mark.parametrize(
    "query", [{"principal": "x" * 300}, {"state": "gone"}, {"resource": "a*b"}, {"limit": "0"}, {"limit": str(2**70)}]
)
def test_a_hostile_grants_filter_is_a_4xx(tokens, world, query):
    response = Api(tokens.bob).get("grants", **query)
    assert 400 <= response.status_code < 500 and set(response.json()) == {"code", "message", "details"}


@pytest.mark.parametrize(
    "query",
    [{"boundary": "moon"}, {"allowed": "perhaps"}, {"task": "not-a-uuid"}, {"principal": "robot:x"}, {"cursor": "!!"}],
)
def test_a_hostile_decisions_filter_is_a_4xx(tokens, world, query):
    response = Api(tokens.bob).get("decisions", **query)
    assert 400 <= response.status_code < 500 and set(response.json()) == {"code", "message", "details"}


def test_an_operator_changes_only_the_agents_they_hold_the_right_over(tokens, world):
    alice = Api(tokens.alice)
    other = grant_create(
        tenant="acme", principal="agent:research.batch", action="tool.search", resource="x", actor="user:dave"
    )
    person = grant_create(tenant="acme", principal="user:alice", action="tool.search", resource="x", actor="user:dave")
    alice.get("grants")  # the token's last use is written on its first call: before the snapshot
    before = snapshot()
    for grant in (other, person):
        assert_error(alice.post(f"grants/{grant.id}/revoke", {"reason": "mine now"}), 403, "FORBIDDEN")
    assert_error(alice.post("grants", {**OK, "principal": "user:alice"}), 403, "FORBIDDEN")
    assert_error(alice.post("grants", {**OK, "principal": "agent:research.batch"}), 403, "FORBIDDEN")
    assert snapshot() == before
    assert alice.post(f"grants/{world.grant.id}/revoke", {"reason": "mine"}).json()["state"] == "revoked"
    assert Api(tokens.dave).post(f"grants/{person.id}/revoke", {"reason": "admin"}).status_code == 200


def test_a_read_token_of_an_admin_changes_no_grant(people, world):
    from tests.api.conftest import make_token

    dave_read = Api(make_token(people.dave, scope="read"))
    assert_error(dave_read.post(f"grants/{world.grant.id}/revoke", {"reason": "x"}), 403, "FORBIDDEN")


def test_the_preview_counts_what_the_revoke_event_records(tokens, world):
    dave = Api(tokens.dave)
    preview = dave.get(f"grants/{world.grant.id}/preview").json()
    assert (
        preview["affected_tasks"] == 1 == len(preview["tasks"])
    )  # the queued t.steps task (the blocked one is t.effect's)
    revoked = dave.post(f"grants/{world.grant.id}/revoke", {"reason": "rotating"})
    assert revoked.status_code == 200
    event = AuditEvent.objects.get(kind="grant.revoked")
    assert event.data["affected_tasks"] == preview["affected_tasks"]
    assert sorted(event.data["affected_task_ids"]) == sorted(t["id"] for t in preview["tasks"])
    history = dave.get(f"grants/{world.grant.id}").json()["history"]
    assert [(h["kind"], h["actor"], h["reason"]) for h in history] == [
        ("grant.created", "user:dave", ""),
        ("grant.revoked", "user:dave", "rotating"),
    ]


def test_creating_narrowing_and_listing(tokens, world):
    dave = Api(tokens.dave)
    made = dave.post("grants", {**OK, "resource": "repo:acme/docs*", "expires_at": "2099-01-01T00:00:00+02:00"})
    assert made.status_code == 201, made.content
    body = made.json()
    assert (body["expires_at"], body["granted_by"], body["state"]) == ("2098-12-31T22:00:00+00:00", "user:dave", "live")
    narrowed = dave.post(f"grants/{body['id']}/narrow", {"resource": "repo:acme/docs/a", "reason": "one doc"})
    assert narrowed.json()["resource"] == "repo:acme/docs/a" and narrowed.json()["narrowed_by"] == "user:dave"
    listed = dave.get("grants", principal="agent:t.steps", resource="repo:acme/docs/a").json()["items"]
    assert [g["id"] for g in listed] == [body["id"], world.grant.id]
    assert Grant.objects.filter(tenant="acme").count() == 2


def test_decisions_are_listed_with_their_filters(tokens, world):
    authorize(task=world.task.id, action="tool.search", resource="repo:acme/a", boundary="credential_gateway")
    authorize(task=world.task.id, action="model.chat", resource="gpt", boundary="grant_check")
    bob = Api(tokens.bob)
    assert len(bob.get("decisions").json()["items"]) == 2
    denied = bob.get("decisions", allowed="false", boundary="grant_check", principal="agent:t.steps").json()["items"]
    assert [(d["action"], d["allowed"], d["reason_code"]) for d in denied] == [("model.chat", False, "no_grant_agent")]
    assert bob.get("decisions", task=str(world.failed.id)).json()["items"] == []
    assert_error(Api(tokens.carol).get("decisions", task=str(world.task.id)), 404, "TASK_NOT_FOUND")


def test_the_agent_identities_name_their_stewards(tokens, world):
    listed = {a["name"]: a for a in Api(tokens.bob).get("agent-identities").json()}
    assert listed["t.steps"]["stewards"] == ["alice"] and listed["t.steps"]["live_grants"] == 1
    assert listed["research.batch"]["stewards"] == []


def test_every_grant_is_listed_a_page_at_a_time_past_the_old_cap_of_200(tokens, world):
    """The list stopped at 200 grants (1,000 with ?limit=), with no cursor to read on."""
    Grant.objects.bulk_create(
        Grant(
            tenant="acme",
            principal="agent:t.steps",
            action="tool.search",
            resource=f"repo:acme/r{n}",
            granted_by="user:dave",
            revision=1,
        )
        for n in range(1_000)
    )
    dave, items, cursor = Api(tokens.dave), [], None
    while True:
        page = dave.get("grants", limit=300, **({"cursor": cursor} if cursor else {})).json()
        items += page["items"]
        if not (cursor := page["next_cursor"]):
            break
    ids = [g["id"] for g in items]
    assert len(ids) == len(set(ids)) == 1_001 and ids == sorted(ids, reverse=True)
    assert_error(dave.get("grants", state="any", cursor=page_cursor(dave)), 422, "INVALID_INPUT")


def page_cursor(api: Api) -> str:
    return api.get("grants", limit=1).json()["next_cursor"]


# (a grant's resource, the filter, whether the list keeps it): covering it or within it.
RESOURCES = [
    ("repo:acme/*", "repo:acme/docs", True),  # covers the filter
    ("repo:acme/docs", "repo:acme/*", True),  # within the filter
    ("repo:acme/docs", "repo:acme/docs", True),
    ("repo:acme/docs", "repo:acme/doc", False),
    ("repo:acme/doc*", "repo:acme/docs/a", True),
    ("*", "anything", True),
    ("repo:acme/*", "repo:globex/*", False),
    ("repo:acme/a%b", "repo:acme/a%b", True),  # LIKE's wildcards are text here
    ("repo:acme/a_*", "repo:acme/ab", False),
    ("repo:acme/a%*", "repo:acme/a%z", True),
    ("repo:acme/a_c", "repo:acme/a*", True),
]


@pytest.mark.parametrize("resource,query,kept", RESOURCES, ids=[f"{r}~{q}" for r, q, _ in RESOURCES])
def test_the_resource_filter_keeps_the_grants_covering_or_within_it(tokens, world, resource, query, kept):
    from runtime.authz import patterns

    assert kept == (patterns.covers(resource, query) or patterns.covers(query, resource))
    grant = grant_create(tenant="acme", principal="agent:x", action="tool.search", resource=resource, actor="user:dave")
    listed = Api(tokens.bob).get("grants", principal="agent:x", resource=query).json()["items"]
    assert [g["id"] for g in listed] == ([grant.id] if kept else [])
