"""Hostile and careless requests: each is a 4xx in the error shape, never a 5xx, and
writes nothing."""

from __future__ import annotations

import json

import pytest

from runtime.models import Task
from tests.api.conftest import Api, assert_error

DEEP = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit when parsed


def task_body(input) -> bytes:
    return json.dumps({"agent": "t.steps", "input": input}).encode()


# (name, raw body, content type, status, code)
BODIES = [
    ("malformed-json", b'{"agent": "t.steps", "input": {', "application/json", 400, "MALFORMED_JSON"),
    ("trailing-garbage", b'{"agent": "t.steps"} xyz', "application/json", 400, "MALFORMED_JSON"),
    ("nan", b'{"agent": "t.steps", "input": {"x": NaN}}', "application/json", 400, "MALFORMED_JSON"),
    ("deep-nesting-unparseable", DEEP.encode(), "application/json", 400, "MALFORMED_JSON"),
    (
        "latin-1-bytes",
        '{"agent": "t.steps", "input": {"q": "café"}}'.encode("latin-1"),
        "application/json",
        400,
        "BODY_NOT_UTF8",
    ),
    ("text-plain", b'{"agent": "t.steps"}', "text/plain", 415, "UNSUPPORTED_MEDIA_TYPE"),
    ("form", b"agent=t.steps", "application/x-www-form-urlencoded", 415, "UNSUPPORTED_MEDIA_TYPE"),
    ("charset-latin-1", b'{"agent": "t.steps"}', "application/json; charset=latin-1", 415, "UNSUPPORTED_MEDIA_TYPE"),
    (
        "huge-body",
        b'{"agent": "t.steps", "input": {"x": "' + b"a" * 3_000_000 + b'"}}',
        "application/json",
        413,
        "BODY_TOO_LARGE",
    ),
    ("input-past-its-limit", task_body({"x": "a" * 70_000}), "application/json", 413, "INPUT_TOO_LARGE"),
    (
        "input-nested-past-its-limit",
        task_body(json.loads("[" * 70 + "]" * 70) and {"x": json.loads("[" * 70 + "]" * 70)}),
        "application/json",
        422,
        "INPUT_TOO_DEEP",
    ),
    ("nul-in-input", task_body({"x": "a\u0000b"}), "application/json", 422, "INVALID_STRING"),
    ("lone-surrogate", b'{"agent": "t.steps", "input": {"x": "\\ud800"}}', "application/json", 422, "INVALID_STRING"),
    (
        "number-too-large",
        b'{"agent": "t.steps", "input": {"x": 1e400}}',
        "application/json",
        422,
        "NUMBER_OUT_OF_RANGE",
    ),
    ("integer-too-large", task_body({"x": 10**30}), "application/json", 422, "NUMBER_OUT_OF_RANGE"),
    ("nul-in-agent", b'{"agent": "t.\\u0000steps", "input": {}}', "application/json", 422, "INVALID_REQUEST"),
    ("array-body", b"[]", "application/json", 422, "INVALID_REQUEST"),
    ("string-body", b'"tasks"', "application/json", 422, "INVALID_REQUEST"),
    ("empty-body", b"", "application/json", 422, "INVALID_REQUEST"),
    ("input-not-an-object", task_body([1, 2]), "application/json", 422, "INVALID_REQUEST"),
    ("pool-not-a-slug", b'{"agent": "t.steps", "pool": "../x"}', "application/json", 422, "INVALID_REQUEST"),
    ("unknown-pool", b'{"agent": "t.steps", "pool": "nosuch"}', "application/json", 404, "UNKNOWN_POOL"),
]


@pytest.mark.parametrize("name,raw,kind,status,code", BODIES, ids=[b[0] for b in BODIES])
def test_a_hostile_submit_body_is_refused_in_the_error_shape(alice, name, raw, kind, status, code):
    assert_error(alice.post("tasks", raw=raw, content_type=kind), status, code)
    assert Task.objects.count() == 0


# (name, path, query, status, code)
QUERIES = [
    ("limit-zero", "tasks", {"limit": 0}, 422, "INVALID_REQUEST"),
    ("limit-past-max", "tasks", {"limit": 501}, 422, "INVALID_REQUEST"),
    ("limit-negative", "effects", {"limit": -1}, 422, "INVALID_REQUEST"),
    ("limit-not-a-number", "audit", {"limit": "ten"}, 422, "INVALID_REQUEST"),
    ("limit-huge", "tasks", {"limit": 10**30}, 422, "INVALID_REQUEST"),
    ("cursor-bad-alphabet", "tasks", {"cursor": "!!!"}, 422, "INVALID_REQUEST"),
    ("cursor-garbage", "tasks", {"cursor": "abcd"}, 422, "INVALID_INPUT"),
    ("cursor-too-long", "tasks", {"cursor": "a" * 5000}, 422, "INVALID_REQUEST"),
    ("cursor-of-json-garbage", "audit", {"cursor": "WzEsImF1ZGl0IiwiIiwieCIsInkiXQ"}, 422, "INVALID_INPUT"),
    ("nul-in-agent-filter", "tasks", {"agent": "t\x00"}, 422, "INVALID_REQUEST"),
    ("nul-in-actor-filter", "audit", {"actor": "user:\x00"}, 422, "INVALID_REQUEST"),
    # The fuzzer found this one: the schedules' agent filter reached PostgreSQL, which
    # refuses a NUL in text, and the answer was a 500.
    ("nul-in-schedule-agent-filter", "schedules", {"agent": "t\x00"}, 422, "INVALID_REQUEST"),
    ("huge-schedule-agent-filter", "schedules", {"agent": "a" * 201}, 422, "INVALID_REQUEST"),
    ("nul-in-approval-agent-filter", "approvals", {"agent": "t\x00"}, 422, "INVALID_REQUEST"),
    ("control-in-approval-agent-filter", "approvals", {"agent": "t\x1b[2J"}, 422, "INVALID_REQUEST"),
    ("unknown-status", "tasks", {"status": "lost"}, 422, "INVALID_REQUEST"),
    ("unknown-effect-state", "effects", {"state": "maybe"}, 422, "INVALID_REQUEST"),
    ("naive-datetime", "tasks", {"created_after": "2026-01-01T00:00:00"}, 422, "INVALID_REQUEST"),
    ("not-a-datetime", "audit", {"since": "yesterday"}, 422, "INVALID_REQUEST"),
    # Pydantic alone read these as times: Unix seconds, a space for the T, no seconds.
    ("unix-seconds-time", "audit", {"until": "0.5"}, 422, "INVALID_REQUEST"),
    ("unix-seconds-integer-time", "tasks", {"created_before": "1700000000"}, 422, "INVALID_REQUEST"),
    ("space-for-t", "tasks", {"created_after": "2026-01-01 00:00:00Z"}, 422, "INVALID_REQUEST"),
    ("time-without-seconds", "audit", {"since": "2026-01-01T00:00Z"}, 422, "INVALID_REQUEST"),
    ("offset-without-colon", "audit/export", {"since": "2026-01-01T00:00:00+0000"}, 422, "INVALID_REQUEST"),
    # ... and these as numbers, and as ids.
    ("limit-with-spaces", "tasks", {"limit": " 5 "}, 422, "INVALID_REQUEST"),
    ("limit-as-decimal", "effects", {"limit": "5.0"}, 422, "INVALID_REQUEST"),
    ("limit-with-underscore", "audit", {"limit": "5_0"}, 422, "INVALID_REQUEST"),
    ("id-without-hyphens", "tasks/0190f4a28d1c7c3e9f102b6a1e7d4c55", {}, 422, "INVALID_REQUEST"),
    ("id-in-braces", "audit", {"task": "{0190f4a2-8d1c-7c3e-9f10-2b6a1e7d4c55}"}, 422, "INVALID_REQUEST"),
    ("too-many-query-fields", "tasks", {f"x{i}": "1" for i in range(1100)}, 400, "BAD_REQUEST"),
    ("filter-given-twice", "approvals", {"agent": ["t.steps", "t.effect"]}, 422, "INVALID_REQUEST"),
    ("limit-given-twice", "tasks", {"limit": ["5", "6"]}, 422, "INVALID_REQUEST"),
    ("parent-not-a-uuid", "tasks", {"parent": "x"}, 422, "INVALID_REQUEST"),
    ("task-id-not-a-uuid", "tasks/not-a-uuid", {}, 422, "INVALID_REQUEST"),
    ("task-id-nul", "tasks/%00", {}, 422, "INVALID_REQUEST"),
    ("effect-id-overflow", f"effects/{2**70}", {}, 422, "INVALID_REQUEST"),
    ("effect-id-zero", "effects/0", {}, 422, "INVALID_REQUEST"),
    ("audit-id-not-a-number", "audit/abc", {}, 422, "INVALID_REQUEST"),
    ("agent-unknown", "agents/no.such", {}, 422, "UNKNOWN_AGENT"),
]


@pytest.mark.parametrize("name,path,query,status,code", QUERIES, ids=[q[0] for q in QUERIES])
def test_a_hostile_query_is_refused_in_the_error_shape(alice, name, path, query, status, code):
    assert_error(alice.get(path, **query), status, code)


@pytest.mark.parametrize(
    "name,path,body,status,code",
    [
        ("pool-limit-past-its-bound", "pools/default", {"max_running": 10**12}, 400, "ARGUMENT_OUT_OF_RANGE"),
        ("pool-limit-zero", "pools/default", {"max_running": 0}, 422, "INVALID_REQUEST"),
        ("pool-unknown", "pools/nosuch", {"max_queued": 5}, 404, "UNKNOWN_POOL"),
        ("pool-name-not-a-slug", "pools/NO%20SUCH", {"max_queued": 5}, 422, "INVALID_REQUEST"),
        # Every field is optional, and ninja's Schema read any value's attributes: a list,
        # a number or a string passed as an empty change, 200 (schemathesis found it).
        ("pool-body-a-list", "pools/default", [None, None], 422, "INVALID_REQUEST"),
        ("pool-body-a-number", "pools/default", 7, 422, "INVALID_REQUEST"),
        ("pool-body-a-string", "pools/default", "max_running", 422, "INVALID_REQUEST"),
        ("pool-limit-as-text", "pools/default", {"max_running": "5"}, 422, "INVALID_REQUEST"),
        ("pool-limit-as-boolean", "pools/default", {"max_queued": True}, 422, "INVALID_REQUEST"),
    ],
)
def test_a_hostile_pool_change_is_refused(alice, name, path, body, status, code):
    alice.post("tasks", {"agent": "t.steps"})  # the default pool exists from its first use
    assert_error(alice.patch(path, body), status, code)


@pytest.mark.parametrize("key", ["k\x00", "k\n", "x" * 201])
def test_a_hostile_idempotency_key_is_422(alice, key):
    assert_error(alice.post("tasks", {"agent": "t.steps"}, headers={"Idempotency-Key": key}), 422)
    assert Task.objects.count() == 0


@pytest.mark.parametrize(
    "body,code",
    [
        ({"outcome": "maybe"}, "INVALID_REQUEST"),
        ({"outcome": "committed", "receipt": {"x": "\u0000"}}, "INVALID_STRING"),
        ({"outcome": "failed", "note": "n" * 3000}, "INVALID_REQUEST"),
    ],
)
def test_a_hostile_resolution_is_422_and_leaves_the_effect_unknown(alice, body, code):
    from tests.api.world import blocked_task_with_unknown_effect

    _, effect = blocked_task_with_unknown_effect()
    assert_error(alice.post(f"effects/{effect.id}/resolve", body), 422, code)
    effect.refresh_from_db()
    assert effect.state == "unknown"


def test_a_path_with_no_route_or_a_method_it_lacks_answers_in_the_error_shape(alice):
    assert_error(alice.get("no/such/route"), 404, "NOT_FOUND")
    assert_error(Api(None).get("no/such/route"), 404, "NOT_FOUND")
    refused = assert_error(alice.call("PUT", "tasks", {}), 405, "METHOD_NOT_ALLOWED")
    assert set(refused["details"]["allowed"]) == {"GET", "POST"}
