"""The stop routes: a stop and its summary, the cancel alias, a new run, the kill switch;
and a table of hostile requests to each new route, each refused with a stable code
and writing nothing."""

from __future__ import annotations

import json
import uuid

import pytest

from runtime import states
from runtime.models import AuditEvent, Stop, Task
from runtime.stops.services import stop_ack
from tests.api.conftest import Api, assert_error
from tests.api.test_hostile import DEEP
from tests.console.world import attempt


def submit(api: Api, agent: str = "t.steps") -> str:
    return api.post("tasks", {"agent": agent, "input": {"n": 1}}).json()["id"]


def running(api: Api) -> str:
    task_id = submit(api)
    Task.objects.filter(id=task_id).update(status=states.RUNNING)
    attempt(Task.objects.get(id=task_id))
    return task_id


def test_a_stop_of_a_running_task_waits_for_its_worker_and_the_summary_says_so(alice):
    task_id = running(alice)
    preview = alice.get(f"tasks/{task_id}/stop-preview").json()
    assert preview["count"] == 1 and [t["id"] for t in preview["tasks"]] == [task_id]
    started = alice.post(f"tasks/{task_id}/stop", {"reason": "runaway"}).json()
    assert (started["tasks"], started["cancelled"], started["stopping"]) == ([task_id], [], [task_id])
    summary = alice.get(f"tasks/{task_id}/stop-summary").json()
    assert summary["stop"]["state"] == "stopping" and summary["stop"]["reason"] == "runaway"
    assert summary["stop"]["actor"] == "user:alice" and summary["stopping"] == 1
    rows = {r["boundary"]: r["state"] for r in summary["tasks"][0]["boundaries"]}
    assert rows == {
        "worker": "waiting",
        "storage": "acknowledged",
        "credential_gateway": "acknowledged",
        "scheduler": "acknowledged",
    }
    assert stop_ack(task_id=task_id, boundary=states.WORKER, by="vm:1", detail={"ended": "cleanly"})
    done = alice.get(f"stops/{started['stop_id']}").json()
    assert done["stop"]["state"] == "cancelled" and done["complete"] and done["tasks"][0]["status"] == "cancelled"
    assert done["to_last_ack_ms"] >= 0 and done["unresolved"] == []
    assert_error(alice.post(f"tasks/{task_id}/stop", {"reason": "again"}), 409, "INVALID_TRANSITION")


def test_a_new_run_of_a_cancelled_task_links_to_it(alice):
    task_id = submit(alice)
    alice.post(f"tasks/{task_id}/stop", {"reason": "wrong input"})
    made = alice.post(f"tasks/{task_id}/rerun", {"reason": "input fixed"})
    assert made.status_code == 201
    new = made.json()
    assert new["rerun_of"] == task_id and new["id"] != task_id
    assert Task.objects.get(id=new["id"]).rerun_of_id == uuid.UUID(task_id)
    assert alice.get(f"tasks/{new['id']}").json()["rerun_of"] == task_id
    assert alice.get(f"tasks/{task_id}").json()["stop"] is not None
    assert_error(alice.post(f"tasks/{new['id']}/rerun", {"reason": "it is queued"}), 409, "INVALID_TRANSITION")


# Committed for real: the refused insert aborts the transaction it runs in (a submission
# autocommits; inside a test's wrapping transaction the next statement would fail).
@pytest.mark.django_db(transaction=True)
def test_the_kill_switch_closes_submission_until_it_is_reopened(alice, tokens):
    live = submit(alice)
    assert alice.get("agents/t.steps/stop-preview").json()["count"] == 1
    started = alice.post("agents/t.steps/stop", {"reason": "incident 42"}).json()
    assert started["tasks"] == [live] and Task.objects.get(id=live).status == states.CANCELLED
    switch = alice.get("agents/t.steps/switch").json()
    assert (switch["submission"], switch["changed_by"], switch["stop_id"]) == (
        "closed",
        "user:alice",
        started["stop_id"],
    )
    identities = {i["name"]: i["submission"] for i in alice.get("agent-identities").json()}
    assert identities["t.steps"] == "closed" and identities["t.effect"] == "open"
    assert_error(alice.post("tasks", {"agent": "t.steps"}), 409, "AGENT_STOPPED")
    assert Api(tokens.carol).post("tasks", {"agent": "t.steps"}).status_code == 201  # globex is not acme
    reopened = alice.post("agents/t.steps/reopen", {"reason": "fixed"}).json()
    assert reopened["changed"] and reopened["submission"] == "open"
    assert not alice.post("agents/t.steps/reopen", {"reason": "again"}).json()["changed"]
    assert alice.post("tasks", {"agent": "t.steps"}).status_code == 201


def test_a_kill_switch_with_nothing_live_is_over_at_once(alice):
    started = alice.post("agents/t.effect/stop", {"reason": "quiet"}).json()
    assert started["tasks"] == []
    summary = alice.get(f"stops/{started['stop_id']}").json()
    assert summary["stop"]["state"] == "nothing was live" and summary["task_count"] == 0


def body(reason) -> bytes:
    return json.dumps({"reason": reason}).encode()


# (name, raw body, content type, status, code): sent to every new POST route.
BODIES = [
    ("malformed-json", b'{"reason": ', "application/json", 400, "MALFORMED_JSON"),
    ("deep-nesting", DEEP.encode(), "application/json", 400, "MALFORMED_JSON"),
    ("latin-1-bytes", '{"reason": "café"}'.encode("latin-1"), "application/json", 400, "BODY_NOT_UTF8"),
    ("text-plain", body("x"), "text/plain", 415, "UNSUPPORTED_MEDIA_TYPE"),
    ("huge-body", body("a" * 3_000_000), "application/json", 413, "BODY_TOO_LARGE"),
    ("reason-too-long", body("a" * 2001), "application/json", 422, "INVALID_REQUEST"),
    ("reason-empty", body(""), "application/json", 422, "INVALID_REQUEST"),
    ("reason-blank", body("   \n"), "application/json", 422, "INVALID_REQUEST"),
    ("reason-missing", b"{}", "application/json", 422, "INVALID_REQUEST"),
    ("reason-not-a-string", b'{"reason": ["x"]}', "application/json", 422, "INVALID_REQUEST"),
    ("reason-nested", json.dumps({"reason": {"a": [[[[1]]]]}}).encode(), "application/json", 422, "INVALID_REQUEST"),
    ("reason-nul", body("why\u0000"), "application/json", 422, "INVALID_STRING"),
    ("array-body", b"[]", "application/json", 422, "INVALID_REQUEST"),
    ("empty-body", b"", "application/json", 422, "INVALID_REQUEST"),
]
POSTS = [
    "tasks/{task}/stop",
    "tasks/{task}/cancel",
    "tasks/{task}/rerun",
    "agents/t.steps/stop",
    "agents/t.steps/reopen",
]


@pytest.mark.parametrize("path", POSTS)
@pytest.mark.parametrize("name,raw,kind,status,code", BODIES, ids=[b[0] for b in BODIES])
def test_a_hostile_stop_body_is_refused_and_writes_nothing(alice, path, name, raw, kind, status, code):
    task_id = submit(alice)
    before = AuditEvent.objects.count()
    assert_error(alice.post(path.format(task=task_id), raw=raw, content_type=kind), status, code)
    assert AuditEvent.objects.count() == before and not Stop.objects.exists()
    assert Task.objects.get(id=task_id).status == states.QUEUED


# (name, method, path, status, code): ids and names that name nothing, or nothing of ours.
PATHS = [
    ("task-not-a-uuid", "POST", "tasks/nope/stop", 422, "INVALID_REQUEST"),
    ("task-nul", "POST", "tasks/%00/cancel", 422, "INVALID_REQUEST"),
    ("task-unknown", "POST", f"tasks/{uuid.uuid4()}/stop", 404, "TASK_NOT_FOUND"),
    ("rerun-unknown", "POST", f"tasks/{uuid.uuid4()}/rerun", 404, "TASK_NOT_FOUND"),
    ("summary-unknown-task", "GET", f"tasks/{uuid.uuid4()}/stop-summary", 404, "TASK_NOT_FOUND"),
    ("summary-not-a-uuid", "GET", "tasks/1/stop-summary", 422, "INVALID_REQUEST"),
    ("preview-unknown-task", "GET", f"tasks/{uuid.uuid4()}/stop-preview", 404, "TASK_NOT_FOUND"),
    ("stop-unknown", "GET", f"stops/{uuid.uuid4()}", 404, "STOP_NOT_FOUND"),
    ("stop-not-a-uuid", "GET", "stops/123", 422, "INVALID_REQUEST"),
    ("stop-id-huge", "GET", "stops/" + "f" * 5000, 422, "INVALID_REQUEST"),
    ("agent-unknown", "POST", "agents/no.such/stop", 422, "UNKNOWN_AGENT"),
    ("agent-unknown-reopen", "POST", "agents/no.such/reopen", 422, "UNKNOWN_AGENT"),
    ("agent-unknown-switch", "GET", "agents/no.such/switch", 422, "UNKNOWN_AGENT"),
    ("agent-name-too-long", "POST", "agents/" + "a" * 300 + "/stop", 422, "INVALID_REQUEST"),
    ("stop-wrong-method", "PUT", "stops/" + str(uuid.uuid4()), 405, "METHOD_NOT_ALLOWED"),
]


@pytest.mark.parametrize("name,method,path,status,code", PATHS, ids=[p[0] for p in PATHS])
def test_a_stop_route_naming_nothing_is_refused_with_its_code(alice, name, method, path, status, code):
    assert_error(alice.call(method, path, {"reason": "why not"}), status, code)
    assert not Stop.objects.exists()


def test_a_task_never_stopped_has_no_summary(alice):
    assert_error(alice.get(f"tasks/{submit(alice)}/stop-summary"), 404, "STOP_NOT_FOUND")


def test_another_tenants_stop_task_and_agent_switch_are_theirs(alice, carol):
    task_id = submit(alice)
    stop_id = alice.post(f"tasks/{task_id}/stop", {"reason": "ours"}).json()["stop_id"]
    for method, path in [
        ("GET", f"stops/{stop_id}"),
        ("GET", f"tasks/{task_id}/stop-summary"),
        ("POST", f"tasks/{task_id}/rerun"),
        ("GET", f"tasks/{task_id}/stop-preview"),
    ]:
        code = "STOP_NOT_FOUND" if path.startswith("stops/") else "TASK_NOT_FOUND"
        assert_error(carol.call(method, path, {"reason": "theirs"}), 404, code)
    alice.post("agents/t.steps/stop", {"reason": "ours only"})
    assert carol.get("agents/t.steps/switch").json()["submission"] == "open"
    assert not carol.post("agents/t.steps/reopen", {"reason": "not mine"}).json()["changed"]
    assert alice.get("agents/t.steps/switch").json()["submission"] == "closed"


@pytest.mark.parametrize("path", POSTS)
def test_a_viewer_is_refused_every_stop_action(tokens, alice, path):
    task_id = submit(alice)
    before = AuditEvent.objects.count()
    assert_error(Api(tokens.bob).post(path.format(task=task_id), {"reason": "viewer"}), 403, "FORBIDDEN")
    assert_error(Api(tokens.alice_read).post(path.format(task=task_id), {"reason": "read"}), 403, "FORBIDDEN")
    assert AuditEvent.objects.count() == before and not Stop.objects.exists()
