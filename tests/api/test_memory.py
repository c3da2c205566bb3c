"""The memory routes: an agent's records in your tenant and one record with its history;
another tenant's are not found; hostile queries and paths are 4xx with stable codes."""

from __future__ import annotations

import pytest

from runtime.memory.services import memory_put, memory_rollback
from tests.api.conftest import assert_error
from tests.runtime.memory import kinds  # noqa: F401  (declares test_note)

AGENT = "memory.writer"


@pytest.fixture
def notes(db):
    memory_put(tenant="acme", agent=AGENT, kind="test_note", key="acme", value={"text": "v1"}, actor="user:alice")
    memory_put(tenant="acme", agent=AGENT, kind="test_note", key="acme", value={"text": "v2"}, actor="user:alice")
    memory_put(tenant="acme", agent=AGENT, kind="test_note", key="other", value={"text": "x"}, actor="user:alice")
    memory_rollback(tenant="acme", agent=AGENT, kind="test_note", key="acme", version=1, actor="user:alice", reason="r")


def test_alice_lists_her_agents_records_at_their_current_version(alice, notes):
    response = alice.get(f"agents/{AGENT}/memory")
    assert response.status_code == 200
    items = response.json()["items"]
    assert [(i["key"], i["version"], i["payload"]) for i in items] == [
        ("acme", 3, {"text": "v1", "tags": []}),
        ("other", 1, {"text": "x", "tags": []}),
    ]
    first = items[0]
    assert first["change"] == "rollback" and first["from_version"] == 1
    assert first["provenance"] == {
        "source": "person",
        "untrusted": False,
        "task": None,
        "attempt": None,
        "step": None,
        "actor": "user:alice",
    }
    assert alice.get(f"agents/{AGENT}/memory", source="model").json()["items"] == []
    assert [i["key"] for i in alice.get(f"agents/{AGENT}/memory", limit=1).json()["items"]] == ["acme"]


def test_one_record_with_its_history(alice, notes):
    response = alice.get(f"agents/{AGENT}/memory/test_note/acme")
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is True
    assert [(h["version"], h["change"]) for h in body["history"]] == [(3, "rollback"), (2, "write"), (1, "write")]


def test_another_tenant_gets_404_and_an_empty_list(carol, notes):
    assert_error(carol.get(f"agents/{AGENT}/memory/test_note/acme"), 404, "MEMORY_RECORD_NOT_FOUND")
    assert carol.get(f"agents/{AGENT}/memory").json()["items"] == []


HUGE = "k" * 5000

# (name, path under agents/, query, status, code)
HOSTILE = [
    ("huge-kind", f"{AGENT}/memory/{HUGE}/acme", {}, 422, "INVALID_REQUEST"),
    ("huge-key", f"{AGENT}/memory/test_note/{HUGE}", {}, 422, "INVALID_REQUEST"),
    ("huge-agent", f"{HUGE}/memory", {}, 422, "INVALID_REQUEST"),
    ("nul-in-kind", f"{AGENT}/memory/te%00st/acme", {}, 422, "INVALID_REQUEST"),
    ("control-in-key", f"{AGENT}/memory/test_note/a%01b", {}, 422, "INVALID_REQUEST"),
    ("latin-1-key", f"{AGENT}/memory/test_note/caf%E9", {}, 404, "MEMORY_RECORD_NOT_FOUND"),
    # A no-break space passes the schema's pattern; the runtime's key rule (printable) refuses it.
    ("unprintable-key", f"{AGENT}/memory/test_note/a%C2%A0b", {}, 422, "INVALID_INPUT"),
    ("unknown-kind", f"{AGENT}/memory/no_such_kind/acme", {}, 404, "MEMORY_RECORD_NOT_FOUND"),
    ("kind-filter-too-long", f"{AGENT}/memory", {"kind": HUGE}, 422, "INVALID_REQUEST"),
    ("source-unknown", f"{AGENT}/memory", {"source": "oracle"}, 422, "INVALID_REQUEST"),
    ("validity-unknown", f"{AGENT}/memory", {"validity": "forever"}, 422, "INVALID_REQUEST"),
    ("untrusted-not-a-bool", f"{AGENT}/memory", {"untrusted": "perhaps"}, 422, "INVALID_REQUEST"),
    ("limit-zero", f"{AGENT}/memory", {"limit": "0"}, 422, "INVALID_REQUEST"),
    ("limit-past-its-bound", f"{AGENT}/memory", {"limit": "501"}, 422, "INVALID_REQUEST"),
    ("limit-huge-number", f"{AGENT}/memory", {"limit": "9" * 400}, 422, "INVALID_REQUEST"),
    ("limit-a-float", f"{AGENT}/memory", {"limit": "5.0"}, 422, "INVALID_REQUEST"),
    ("cursor-not-base64url", f"{AGENT}/memory", {"cursor": "!!not-a-cursor"}, 422, "INVALID_REQUEST"),
    ("cursor-huge", f"{AGENT}/memory", {"cursor": "W" * 10_000}, 422, "INVALID_REQUEST"),
    ("cursor-of-nothing", f"{AGENT}/memory", {"cursor": "WzEsIm5vIl0"}, 422, "INVALID_INPUT"),
]


@pytest.mark.parametrize(("path", "query", "status", "code"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_requests_are_4xx_with_a_stable_code(alice, notes, path, query, status, code):
    assert_error(alice.get(f"agents/{path}", **query), status, code)


def test_a_cursor_of_another_filter_is_refused(alice, notes):
    page = alice.get(f"agents/{AGENT}/memory", limit=1).json()
    assert page["next_cursor"]
    assert_error(
        alice.get(f"agents/{AGENT}/memory", limit=1, cursor=page["next_cursor"], validity="all"), 422, "INVALID_INPUT"
    )
    assert alice.get(f"agents/{AGENT}/memory", limit=1, cursor=page["next_cursor"]).json()["items"][0]["key"] == "other"
