"""The grant forms and filters meet hostile input: huge, malformed, wrong encoding, out of
range, a bad pattern, an expiry in the past. Each is a 4xx page with its stable code and
nothing is written anywhere (tests/snapshot.py)."""

from __future__ import annotations

import pytest

from runtime.authz.services import grant_create
from tests.console.world import World
from tests.snapshot import snapshot

LONG = "y" * 5000
HUGE = "x" * 1_100_000
OK = {"principal": "agent:t.steps", "action": "tool.search", "resource": "repo:acme/*"}

# (name, method, path, fields or raw bytes, status, code shown)
CASES = [
    ("new: principal huge", "post", "/grants/new/", {**OK, "principal": "agent:" + LONG}, 400, "INVALID_IDENTIFIER"),
    ("new: resource huge", "post", "/grants/new/", {**OK, "resource": HUGE}, 400, None),
    ("new: resource NUL", "post", "/grants/new/", {**OK, "resource": "a\x00b"}, 400, "INVALID_RESOURCE_PATTERN"),
    ("new: star mid-pattern", "post", "/grants/new/", {**OK, "resource": "repo:*/x"}, 400, "INVALID_RESOURCE_PATTERN"),
    ("new: action malformed", "post", "/grants/new/", {**OK, "action": "Rm -rf"}, 400, "INVALID_IDENTIFIER"),
    ("new: principal a task", "post", "/grants/new/", {**OK, "principal": "task:1"}, 400, "INVALID_IDENTIFIER"),
    ("new: no principal", "post", "/grants/new/", {**OK, "principal": ""}, 400, "INVALID_ARGUMENT"),
    (
        "new: expiry past",
        "post",
        "/grants/new/",
        {**OK, "expires_at": "2001-01-01T00:00"},
        400,
        "ARGUMENT_OUT_OF_RANGE",
    ),
    ("new: expiry malformed", "post", "/grants/new/", {**OK, "expires_at": "soon"}, 422, "INVALID_INPUT"),
    ("new: expiry out of range", "post", "/grants/new/", {**OK, "expires_at": "99999-01-01"}, 422, "INVALID_INPUT"),
    (
        "new: latin-1 bytes",
        "post",
        "/grants/new/",
        b"principal=agent%3At.steps&action=tool.search&resource=r%E9",
        422,
        "INVALID_ENCODING",
    ),
    ("revoke: no reason", "post", "/grants/{grant}/revoke/", {"reason": ""}, 400, "INVALID_ARGUMENT"),
    ("revoke: reason huge", "post", "/grants/{grant}/revoke/", {"reason": LONG}, 422, "INVALID_STRING"),
    ("revoke: reason NUL", "post", "/grants/{grant}/revoke/", {"reason": "a\x00"}, 422, "INVALID_STRING"),
    ("revoke: id past 64 bits", "post", f"/grants/{2**64}/revoke/", {"reason": "x"}, 404, None),
    (
        "narrow: wider",
        "post",
        "/grants/{grant}/narrow/",
        {"resource": "repo:*", "reason": "x"},
        400,
        "GRANT_NOT_NARROWER",
    ),
    ("narrow: nothing", "post", "/grants/{grant}/narrow/", {"resource": "", "reason": "x"}, 400, "INVALID_ARGUMENT"),
    (
        "narrow: expiry past",
        "post",
        "/grants/{grant}/narrow/",
        {"expires_at": "2001-01-01", "reason": "x"},
        400,
        "ARGUMENT_OUT_OF_RANGE",
    ),
    ("grants filter: bad state", "get", "/grants/", {"state": LONG}, 400, None),
    ("grants filter: bad principal", "get", "/grants/", {"principal": "robot"}, 400, None),
    ("grants filter: bad pattern", "get", "/grants/", {"resource": "a*b"}, 400, None),
    ("decisions filter: bad boundary", "get", "/decisions/", {"boundary": "moon"}, 400, None),
    ("decisions filter: bad task", "get", "/decisions/", {"task": "nope"}, 400, None),
    ("decisions filter: garbage cursor", "get", "/decisions/", {"cursor": "!!" + LONG}, 400, None),
    (
        "agent stewards: not an operator",
        "post",
        "/agents/t.steps/stewards/",
        {"username": "bob", "allow": "yes"},
        400,
        None,
    ),
    (
        "agent stewards: allow garbage",
        "post",
        "/agents/t.steps/stewards/",
        {"username": "alice", "allow": LONG},
        400,
        None,
    ),
]


@pytest.mark.parametrize(("name", "method", "path", "fields", "status", "code"), CASES, ids=[c[0] for c in CASES])
def test_a_hostile_grant_form_or_filter_is_a_4xx_and_writes_nothing(
    world: World, as_person, name, method, path, fields, status, code
):
    grant = grant_create(
        tenant="acme", principal="agent:t.steps", action="tool.search", resource="repo:acme/*", actor="user:dave"
    )
    client = as_person(world.people.dave)
    client.get("/")  # the session's sign-in is written on its first request: before the snapshot
    url = path.format(grant=grant.id)
    before = snapshot()
    if isinstance(fields, bytes):
        response = client.post(url, fields, content_type="application/x-www-form-urlencoded")
    else:
        response = getattr(client, method)(url, fields)
    assert response.status_code == status, (name, response.status_code, response.content[:300])
    if code is not None:
        assert code.encode() in response.content, name
    assert snapshot() == before, name
