"""Every console form and filter meets hostile input: huge, deeply nested, malformed,
in the wrong encoding, out of range. Each is refused with a 4xx page (never a 5xx), and
nothing is written: no task, no audit row, no change to the object the form was for."""

from __future__ import annotations

import json

import pytest

from console.models import ApiToken
from runtime.models import AuditEvent, Effect, ErasureReceipt, Pool, Task

HUGE = "x" * 1_100_000  # past the 1 MiB Django reads into memory (DATA_UPLOAD_MAX_MEMORY_SIZE)
DEEP = "[" * 5000 + "]" * 5000  # past the input's nesting limit, and Python's recursion
NUL = "abc\x00def"
LONG = "y" * 5000  # longer than any column it could land in

# (name, method, path, form fields): {effect}, {task} and {pool} are filled from the world.
CASES = [
    ("submit: huge input", "post", "/tasks/new/", {"agent": "t.steps", "input": HUGE}),
    ("submit: deep input", "post", "/tasks/new/", {"agent": "t.steps", "input": DEEP}),
    ("submit: input not JSON", "post", "/tasks/new/", {"agent": "t.steps", "input": "{nope"}),
    ("submit: input a list", "post", "/tasks/new/", {"agent": "t.steps", "input": "[1, 2]"}),
    ("submit: NUL in input", "post", "/tasks/new/", {"agent": "t.steps", "input": json.dumps({"s": NUL})}),
    ("submit: number past 64 bits", "post", "/tasks/new/", {"agent": "t.steps", "input": '{"n": 1' + "0" * 30 + "}"}),
    ("submit: unknown agent", "post", "/tasks/new/", {"agent": "no.such", "input": "{}"}),
    ("submit: agent name huge", "post", "/tasks/new/", {"agent": LONG, "input": "{}"}),
    (
        "submit: idempotency key huge",
        "post",
        "/tasks/new/",
        {"agent": "t.steps", "input": "{}", "idempotency_key": LONG},
    ),
    (
        "submit: schema field out of range",
        "post",
        "/tasks/new/",
        {"agent": "research.batch", "in.question": "q", "in.experiments": "99999999999999999999"},
    ),
    ("cancel: reason huge", "post", "/tasks/{task}/cancel/", {"reason": LONG}),
    ("cancel: reason NUL", "post", "/tasks/{task}/cancel/", {"reason": NUL}),
    ("stop: reason huge", "post", "/tasks/{task}/stop/", {"reason": LONG}),
    ("stop: reason NUL", "post", "/tasks/{task}/stop/", {"reason": NUL}),
    ("stop: reason blank", "post", "/tasks/{task}/stop/", {"reason": " \t\n"}),
    ("stop: reason missing", "post", "/tasks/{task}/stop/", {}),
    ("stop: reason past the body limit", "post", "/tasks/{task}/stop/", {"reason": HUGE}),
    ("kill switch: reason blank", "post", "/agents/t.steps/stop/", {"reason": "   "}),
    ("kill switch: reason NUL", "post", "/agents/t.steps/stop/", {"reason": NUL}),
    ("kill switch: reason huge", "post", "/agents/t.steps/stop/", {"reason": LONG}),
    ("reopen: reason NUL", "post", "/agents/t.steps/reopen/", {"reason": NUL}),
    ("reopen: reason huge", "post", "/agents/t.steps/reopen/", {"reason": LONG}),
    ("stop page: id not a uuid", "get", "/stops/not-a-uuid/", {}),
    ("rerun: not cancelled", "post", "/tasks/{task}/rerun/", {"reason": "again"}),
    ("rerun: reason blank", "post", "/tasks/{task}/rerun/", {"reason": "  "}),
    ("rerun: reason NUL", "post", "/tasks/{task}/rerun/", {"reason": NUL}),
    ("resolve: receipt not JSON", "post", "/effects/{effect}/resolve/", {"outcome": "committed", "receipt": "{x"}),
    ("resolve: receipt deep", "post", "/effects/{effect}/resolve/", {"outcome": "committed", "receipt": DEEP}),
    ("resolve: outcome unknown", "post", "/effects/{effect}/resolve/", {"outcome": "maybe"}),
    ("resolve: note huge", "post", "/effects/{effect}/resolve/", {"outcome": "failed", "note": LONG}),
    ("pool limits: past 32 bits", "post", "/pools/{pool}/limits/", {"max_running": "2147483648", "max_queued": "10"}),
    ("pool limits: negative", "post", "/pools/{pool}/limits/", {"max_running": "-1", "max_queued": "10"}),
    ("pool limits: not a number", "post", "/pools/{pool}/limits/", {"max_running": "lots", "max_queued": "1e999"}),
    ("token: name huge", "post", "/tokens/new/", {"name": LONG, "scope": "read"}),
    ("token: scope unknown", "post", "/tokens/new/", {"name": "x", "scope": "root"}),
    ("token: expiry malformed", "post", "/tokens/new/", {"name": "x", "scope": "read", "expires_at": "soon"}),
    ("token: expiry out of range", "post", "/tokens/new/", {"name": "x", "scope": "read", "expires_at": "99999-01-01"}),
    ("token revoke: id past 64 bits", "post", f"/tokens/{2**64}/revoke/", {}),
    ("tenant: unknown", "post", "/tenant/", {"tenant": LONG}),
    ("tasks filter: bad status", "get", "/tasks/", {"status": "nope"}),
    ("tasks filter: bad parent", "get", "/tasks/", {"parent": NUL}),
    ("tasks filter: bad date", "get", "/tasks/", {"created_after": "2026-13-45"}),
    ("tasks filter: garbage cursor", "get", "/tasks/", {"cursor": "!!!" + LONG}),
    ("journal: cursor out of range", "get", "/tasks/{task}/steps/", {"cursor": str(2**70)}),
    ("journal: cursor not a number", "get", "/tasks/{task}/steps/", {"cursor": "abc"}),
    ("effects filter: bad state", "get", "/effects/", {"state": LONG}),
    ("effects filter: bad task", "get", "/effects/", {"task": "not-a-uuid"}),
    ("audit filter: bad since", "get", "/audit/", {"since": "yesterday"}),
    ("audit filter: garbage cursor", "get", "/audit/", {"cursor": "%%%"}),
    ("audit export: bad until", "get", "/audit/export.jsonl", {"until": "0000-00-00"}),
    ("tasks filter: NUL in agent", "get", "/tasks/", {"agent": NUL}),
    ("approvals filter: NUL in agent", "get", "/approvals/", {"agent": NUL}),
    ("approvals filter: bad order", "get", "/approvals/", {"order": LONG}),
    ("schedules filter: NUL in agent", "get", "/schedules/", {"agent": NUL}),
    ("audit filter: NUL in actor", "get", "/audit/", {"actor": NUL}),
    ("grants filter: NUL in principal", "get", "/grants/", {"principal": NUL}),
    ("erasure: kind unknown", "post", "/erasures/new/", {"kind": "planet", "value": "x"}),
    ("erasure: agent empty", "post", "/erasures/new/", {"kind": "agent", "value": ""}),
    ("erasure: agent NUL", "post", "/erasures/new/", {"kind": "agent", "value": NUL}),
    ("erasure: agent huge", "post", "/erasures/new/", {"kind": "agent", "value": LONG, "confirm": "1"}),
    ("erasure: agent, no reason", "post", "/erasures/new/", {"kind": "agent", "value": "t.steps", "confirm": "1"}),
]


def _counts():
    return (
        Task.objects.count(),
        AuditEvent.objects.count(),
        ApiToken.objects.count(),
        ErasureReceipt.objects.count(),
        list(Pool.objects.order_by("name").values_list("name", "max_running", "max_queued")),
        list(Effect.objects.order_by("id").values_list("id", "state")),
    )


@pytest.mark.parametrize(("name", "method", "path", "fields"), CASES, ids=[c[0] for c in CASES])
def test_a_hostile_form_or_filter_is_a_4xx_and_writes_nothing(world, as_person, name, method, path, fields):
    client = as_person(world.people.alice)
    url = path.format(task=world.parent.id, effect=world.effect.id, pool=world.parent.pool_id)
    before = _counts()

    response = getattr(client, method)(url, fields)

    assert 400 <= response.status_code < 500, (name, response.status_code, response.content[:300])
    assert _counts() == before, name


@pytest.mark.parametrize(
    "path",
    [
        "/tasks/new/",
        "/effects/{effect}/resolve/",
        "/tokens/new/",
        "/schedules/new/",
        "/webhooks/new/",
        "/pools/{pool}/limits/",
        "/agents/t.steps/stop/",
        "/agents/t.steps/reopen/",
        "/tasks/{task}/stop/",
    ],
)
def test_a_body_that_is_not_utf8_is_a_4xx_and_writes_nothing(world, as_person, path):
    client = as_person(world.people.alice)
    before = _counts()

    response = client.post(
        path.format(effect=world.effect.id, task=world.parent.id, pool=world.parent.pool_id),
        data=b"agent=t.steps&input=%FF%FE%00&name=\xff\xfe&cron=*+*+*+*+*&max_running=3"
        b"&reason=stop\xff\xfe&timezone=UTC&note=\xff",
        content_type="application/x-www-form-urlencoded",
    )

    assert 400 <= response.status_code < 500, response.content[:300]
    assert _counts() == before
