"""The retention and erasure API: an operator of the tenant sets periods, previews and runs
an erasure (a viewer cannot: FORBIDDEN); another tenant's task is not found; hostile
bodies are a 4xx with a stable code and write nothing; the preview equals the receipt,
whose detail verifies."""

from __future__ import annotations

import pytest

from runtime.memory.services import memory_put
from runtime.models import ErasureReceipt, MemoryRecord, RetentionPolicy, Task
from runtime.testing import StewardTestEnv
from tests.api.conftest import Api, assert_error
from tests.runtime.lifecycle.test_erasure import FORGET
from tests.runtime.memory import kinds  # noqa: F401  (declares test_note)
from tests.snapshot import snapshot

PERIODS = {"task_days": 30, "gateway_days": 30, "memory_days": 30, "decision_days": 30, "audit_days": 365}

HOSTILE = [
    ("zero days", "PUT", "retention", {**PERIODS, "task_days": 0}, 422, "INVALID_REQUEST"),
    ("huge", "PUT", "retention", {**PERIODS, "task_days": 10**30}, 422, "INVALID_REQUEST"),
    ("string", "PUT", "retention", {**PERIODS, "task_days": "30"}, 422, "INVALID_REQUEST"),
    ("deep", "PUT", "retention", {"task_days": [[[[[[1]]]]]]}, 422, "INVALID_REQUEST"),
    ("unknown field", "PUT", "retention", {**PERIODS, "tenant": "globex"}, 422, "INVALID_REQUEST"),
    ("audit shorter", "PUT", "retention", {**PERIODS, "audit_days": 10}, 400, "INVALID_ARGUMENT"),
    ("not JSON", "PUT", "retention", b"{task_days: 1", 400, "MALFORMED_JSON"),
    ("latin-1", "PUT", "retention", b'{"reason": "caf\xe9"}', 400, "BODY_NOT_UTF8"),
    ("kind unknown", "POST", "erasures/preview", {"kind": "planet", "value": "x"}, 422, "INVALID_REQUEST"),
    ("task not a uuid", "POST", "erasures/preview", {"kind": "task", "value": "nope"}, 404, "TASK_NOT_FOUND"),
    ("owner too long", "POST", "erasures/preview", {"kind": "owner", "value": "u" * 201}, 422, "INVALID_REQUEST"),
    ("owner NUL", "POST", "erasures/preview", {"kind": "owner", "value": "user:\u0000"}, 400, "INVALID_IDENTIFIER"),
    ("agent too long", "POST", "erasures/preview", {"kind": "agent", "value": "a" * 201}, 422, "INVALID_REQUEST"),
    ("agent NUL", "POST", "erasures/preview", {"kind": "agent", "value": "bot\u0000"}, 400, "INVALID_IDENTIFIER"),
    ("agent empty", "POST", "erasures", {"kind": "agent", "value": "", "reason": "x"}, 400, "INVALID_IDENTIFIER"),
    ("agent deep", "POST", "erasures/preview", {"kind": "agent", "value": [[["bot"]]]}, 422, "INVALID_REQUEST"),
    ("no reason", "POST", "erasures", {"kind": "tenant", "value": ""}, 422, "INVALID_REQUEST"),
    ("empty reason", "POST", "erasures", {"kind": "tenant", "value": "", "reason": " "}, 400, "INVALID_ARGUMENT"),
    ("reason huge", "POST", "erasures", {"kind": "tenant", "reason": "x" * 5000}, 422, "INVALID_REQUEST"),
]


@pytest.mark.parametrize(("name", "method", "path", "body", "status", "code"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_body_is_a_4xx_with_a_stable_code_and_writes_nothing(alice, name, method, path, body, status, code):
    alice.get("retention")
    before = snapshot()
    raw = body if isinstance(body, bytes) else None
    response = alice.call(method, path, None if raw else body, raw=raw)
    assert_error(response, status, code)
    assert snapshot() == before


def test_an_operator_sets_retention_and_a_viewer_reads_it_but_cannot(alice, tokens):
    response = alice.call("PUT", "retention", {**PERIODS, "reason": "policy"})
    assert response.status_code == 200, response.content
    assert response.json()["task_days"] == 30 and response.json()["version"] == 1
    bob = Api(tokens.bob)
    assert bob.get("retention").json()["audit_days"] == 365
    assert_error(bob.call("PUT", "retention", PERIODS), 403, "FORBIDDEN")
    assert RetentionPolicy.objects.get(tenant="acme").version == 1


def _finished(tenant="acme"):
    with StewardTestEnv(tenant=tenant, owner="user:alice") as env:
        task = env.submit("lifecycle.keeper", {"secret": FORGET})
        env.run_until_idle()
    return task


def test_the_preview_equals_the_receipt_and_the_receipt_verifies(alice, tokens):
    task = _finished()
    subject = {"kind": "task", "value": str(task)}
    preview = alice.post("erasures/preview", subject)
    assert preview.status_code == 200, preview.content
    assert_error(Api(tokens.bob).post("erasures", {**subject, "reason": "x"}), 403, "FORBIDDEN")
    assert_error(Api(tokens.bob).post("erasures/preview", subject), 403, "FORBIDDEN")
    made = alice.post("erasures", {**subject, "reason": "asked"})
    assert made.status_code == 201, made.content
    receipt = made.json()
    assert preview.json()["places"] == {p["place"]: p["rows"] for p in receipt["body"]["places"]}
    assert preview.json()["rows"] == receipt["rows"] > 0
    detail = alice.get(f"erasures/{receipt['id']}").json()
    assert detail["verified"] is True and detail["problems"] == []
    assert [r["id"] for r in alice.get("erasures").json()] == [receipt["id"]]
    assert Task.objects.get(id=task).input is None


def test_another_tenants_task_and_receipt_are_not_found(alice, carol):
    task = _finished()
    assert_error(carol.post("erasures/preview", {"kind": "task", "value": str(task)}), 404, "TASK_NOT_FOUND")
    assert_error(carol.post("erasures", {"kind": "task", "value": str(task), "reason": "x"}), 404, "TASK_NOT_FOUND")
    receipt = alice.post("erasures", {"kind": "task", "value": str(task), "reason": "asked"}).json()
    assert_error(carol.get(f"erasures/{receipt['id']}"), 404, "ERASURE_RECEIPT_NOT_FOUND")
    assert carol.get("erasures").json() == []
    assert ErasureReceipt.objects.count() == 1


def test_a_live_task_is_refused_with_a_conflict(alice):
    with StewardTestEnv(tenant="acme", owner="user:alice") as env:
        task = env.submit("lifecycle.keeper", {"secret": FORGET})
    assert_error(
        alice.post("erasures", {"kind": "task", "value": str(task), "reason": "x"}), 409, "ERASURE_SUBJECT_LIVE"
    )
    assert Task.objects.get(id=task).input == {"secret": FORGET}


def test_an_agents_memory_is_erased_through_the_api_and_the_receipt_verifies(alice, tokens):
    memory_put(tenant="acme", agent="memory.reader", kind="test_note", key="k", value={"text": FORGET}, actor="u:a")
    subject = {"kind": "agent", "value": "memory.reader"}
    preview = alice.post("erasures/preview", subject)
    assert preview.status_code == 200, preview.content
    assert preview.json()["places"] == {"memory": 1} and preview.json()["tasks"] == 0
    assert_error(Api(tokens.bob).post("erasures", {**subject, "reason": "x"}), 403, "FORBIDDEN")
    made = alice.post("erasures", {**subject, "reason": "forget me"})
    assert made.status_code == 201, made.content
    assert made.json()["subject_kind"] == "agent" and made.json()["rows"] == 1
    assert alice.get(f"erasures/{made.json()['id']}").json()["verified"] is True
    assert MemoryRecord.objects.get(key="k").payload is None
