"""Tasks over the API: submit with idempotency keys, schema refusals, filters, keyset
pages that hold while tasks arrive, a long journal paged, cancel and resume."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runtime.models import Step, Task
from runtime.tasks.services import task_submit
from tests.api.conftest import Api, assert_error, make_token
from tests.api.world import ALICE
from tests.people import make_people


def submit(api: Api, agent="t.steps", input=None, key=None):
    return api.post(
        "tasks",
        {"agent": agent, "input": input if input is not None else {"n": 1}},
        headers={"Idempotency-Key": key} if key else None,
    )


def test_a_new_task_is_201_the_same_key_and_input_200_with_that_task_another_input_409(alice):
    made = submit(alice, key="nightly-1")
    assert made.status_code == 201 and made.json()["created"] is True
    again = submit(alice, key="nightly-1")
    assert again.status_code == 200 and again.json() == {**made.json(), "created": False}
    conflict = assert_error(submit(alice, input={"n": 2}, key="nightly-1"), 409, "IDEMPOTENCY_CONFLICT")
    assert conflict["details"]["task_id"] == made.json()["id"]
    task = Task.objects.get(id=made.json()["id"])
    assert (task.tenant, task.owner, task.idempotency_key) == ("acme", "user:alice", "nightly-1")
    assert Task.objects.count() == 1


def test_idempotency_keys_are_per_tenant(alice, carol):
    ours, theirs = submit(alice, key="k"), submit(carol, key="k")
    assert (ours.status_code, theirs.status_code) == (201, 201) and ours.json()["id"] != theirs.json()["id"]


def test_without_a_key_each_submit_is_a_new_task(alice):
    assert {submit(alice).json()["id"] for _ in range(3)}.__len__() == 3


def test_an_input_that_does_not_fit_the_agents_schema_is_422_naming_each_field(alice):
    body = assert_error(submit(alice, "research.batch", {"question": "", "experiments": 99}), 422, "INVALID_INPUT")
    assert body["details"]["fields"] == [
        {"loc": ["input", "question"], "msg": "String should have at least 1 character"},
        {"loc": ["input", "experiments"], "msg": "Input should be less than or equal to 20"},
    ]
    assert Task.objects.count() == 0


def test_an_unknown_agent_is_422(alice):
    assert_error(submit(alice, "no.such.agent"), 422, "UNKNOWN_AGENT")


def test_a_malformed_request_field_is_422_naming_it_with_its_location(alice):
    body = assert_error(alice.post("tasks", {"agent": 5, "input": []}), 422, "INVALID_REQUEST")
    locs = {tuple(f["loc"]) for f in body["details"]["fields"]}
    assert locs == {("body", "agent"), ("body", "input")}, locs


def test_the_detail_answers_the_task_with_its_input(alice):
    made = submit(alice, input={"n": 3}).json()
    body = alice.get(f"tasks/{made['id']}").json()
    assert (body["id"], body["agent"], body["status"], body["input"], body["owner"]) == (
        made["id"],
        "t.steps",
        "queued",
        {"n": 3},
        "user:alice",
    )


def test_the_list_filters_by_status_agent_and_creation_time(alice):
    first = submit(alice).json()["id"]
    research = submit(alice, "research.batch", {"question": "why?"}).json()["id"]
    Task.objects.filter(id=first).update(status="failed")

    def listed(**query):  # a set: one transaction's ids share their clock, so their order is not theirs
        return {t["id"] for t in alice.get("tasks", **query).json()["items"]}

    assert listed() == {research, first}
    assert listed(status="failed") == {first}
    assert listed(agent="research.batch") == {research}
    later = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert listed(created_after=later) == set() and listed(created_before=later) == {research, first}
    assert_error(alice.get("tasks", status="lost"), 422, "INVALID_REQUEST")


def page_through(api: Api, path: str, limit: int, between=None, **query) -> list[str]:
    seen, cursor = [], None
    while True:
        body = api.get(path, limit=limit, **({"cursor": cursor} if cursor else {}), **query).json()
        seen += [item.get("id", item.get("seq")) for item in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            return seen
        if between:
            between()


def test_pages_neither_skip_nor_repeat_while_tasks_are_submitted_between_them(alice):
    existing = [str(task_submit(agent="t.steps", input={"i": i}, **ALICE).task_id) for i in range(23)]
    seen = page_through(alice, "tasks", 5, between=lambda: task_submit(agent="t.steps", input={}, **ALICE))
    # Inside this test's one transaction every id carries the same clock (ids.py), so a
    # task added between pages may sort behind the cursor and be seen: only "none
    # repeated, none that existed skipped" is promised (runtime/paging.py).
    assert len(seen) == len(set(seen)) and set(existing) <= set(seen)
    assert seen == sorted(seen, reverse=True)


@pytest.mark.django_db(transaction=True)
def test_pages_hold_while_another_connection_commits_tasks_throughout():
    """A writer on its own connection commits tasks the whole time a client pages."""
    people = make_people()
    api = Api(make_token(people.alice))
    existing = [str(task_submit(agent="t.steps", input={"i": i}, **ALICE).task_id) for i in range(40)]
    stop, added = threading.Event(), []

    def writer():
        try:
            while not stop.is_set():
                added.append(task_submit(agent="t.steps", input={}, **ALICE).task_id)
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        seen = page_through(api, "tasks", 3)
    finally:
        stop.set()
        thread.join()
    assert added, "the writer must have committed tasks while the pages were read"
    assert len(seen) == len(set(seen)), "a page repeated a task"
    assert set(existing) <= set(seen), "a page skipped a task that existed before paging began"
    assert seen == sorted(seen, reverse=True), "newest first throughout"


def test_a_five_thousand_step_journal_is_paged(alice):
    task_id = submit(alice).json()["id"]
    now = timezone.now()
    Step.objects.bulk_create(
        Step(
            task_id=task_id,
            seq=seq,
            name=f"s{seq}",
            kind="step",
            output=seq,
            epoch=1,
            started_at=now,
            finished_at=now + timedelta(milliseconds=2),
        )
        for seq in range(1, 5001)
    )
    first = alice.get(f"tasks/{task_id}/steps", limit=500).json()
    assert [s["seq"] for s in first["items"]] == list(range(5000, 4500, -1))
    assert first["items"][0]["duration_ms"] == 2.0
    assert page_through(alice, f"tasks/{task_id}/steps", 500) == list(range(5000, 0, -1))


def test_a_cursor_from_another_list_or_filter_is_refused(alice):
    for _ in range(3):
        submit(alice)
    cursor = alice.get("tasks", limit=1).json()["next_cursor"]
    assert_error(alice.get("tasks", limit=1, cursor=cursor, status="queued"), 422, "INVALID_INPUT")
    assert_error(alice.get("effects", cursor=cursor), 422, "INVALID_INPUT")


def test_cancel_stops_a_live_task_once_and_resume_queues_it_again(alice):
    task_id = submit(alice).json()["id"]
    stopped = alice.post(f"tasks/{task_id}/cancel", {"reason": "wrong input"}).json()
    assert (stopped["tasks"], stopped["cancelled"], stopped["stopping"]) == ([task_id], [task_id], [])
    assert_error(alice.post(f"tasks/{task_id}/cancel", {"reason": "again"}), 409, "INVALID_TRANSITION")
    resumed = alice.post(f"tasks/{task_id}/resume", {"note": "fixed"}).json()
    assert (resumed["status"], resumed["next_reason"]) == ("queued", "resume")
    assert_error(alice.post(f"tasks/{task_id}/resume", {"note": "twice"}), 409, "INVALID_TRANSITION")
    kinds = [e["kind"] for e in alice.get(f"tasks/{task_id}/audit").json()["items"]]
    assert kinds == ["task.resumed", "task.cancelled", "task.stopping", "task.submitted"]


def test_the_detail_says_what_an_operator_may_do_and_the_routes_agree(alice):
    """`actions` (runtime/tasks/actions.py, as the console and the CLI ask it): each
    refused action's route refuses too, each allowed one's goes through."""
    task_id = submit(alice).json()["id"]
    queued = alice.get(f"tasks/{task_id}").json()["actions"]
    assert queued == {
        "resume": {"allowed": False, "refusal": "status"},
        "stop": {"allowed": True, "refusal": None},
        "rerun": {"allowed": False, "refusal": "status"},
        "released_by": None,
    }
    assert_error(alice.post(f"tasks/{task_id}/resume", {"note": "early"}), 409, "INVALID_TRANSITION")
    assert_error(alice.post(f"tasks/{task_id}/rerun", {"reason": "early"}), 409, "INVALID_TRANSITION")
    assert alice.post(f"tasks/{task_id}/stop", {"reason": "wrong input"}).json()["cancelled"] == [task_id]

    cancelled = alice.get(f"tasks/{task_id}").json()["actions"]
    assert {name: cancelled[name]["refusal"] for name in ("resume", "stop", "rerun")} == {
        "resume": None,
        "stop": "finished",
        "rerun": None,
    }
    assert_error(alice.post(f"tasks/{task_id}/stop", {"reason": "again"}), 409, "INVALID_TRANSITION")
    assert alice.post(f"tasks/{task_id}/rerun", {"reason": "fixed input"}).status_code == 201
    resumed = alice.post(f"tasks/{task_id}/resume", {"note": "fixed"}).json()
    assert resumed["actions"]["resume"] == {"allowed": False, "refusal": "status"}  # queued again


def test_an_unknown_task_is_404(alice):
    assert_error(alice.get(f"tasks/{uuid.uuid4()}"), 404, "TASK_NOT_FOUND")
    assert_error(alice.post(f"tasks/{uuid.uuid4()}/cancel", {"reason": "gone"}), 404, "TASK_NOT_FOUND")


def test_cancel_needs_a_reason_like_stop_and_resume_takes_no_body(alice):
    task_id = submit(alice).json()["id"]
    assert_error(alice.call("POST", f"tasks/{task_id}/cancel"), 422, "INVALID_REQUEST")
    assert_error(alice.post(f"tasks/{task_id}/cancel", {"reason": ""}), 422, "INVALID_REQUEST")
    assert alice.post(f"tasks/{task_id}/cancel", {"reason": "no longer needed"}).json()["cancelled"] == [task_id]
    assert alice.call("POST", f"tasks/{task_id}/resume").json()["status"] == "queued"


def test_a_tasks_children_are_paged_newest_spawn_first(alice):
    from runtime.tasks.services import insert_task

    parent = submit(alice).json()["id"]
    for seq in range(1, 8):
        insert_task(
            agent="t.steps",
            input_text="{}",
            digest=f"{seq:064d}",
            tenant="acme",
            owner="user:alice",
            pool="default",
            actor="user:alice",
            parent_id=parent,
            root_id=parent,
            spawn_seq=seq,
        )
    pages = []
    cursor = None
    while True:
        body = alice.get(f"tasks/{parent}/children", limit=3, **({"cursor": cursor} if cursor else {})).json()
        pages.append([Task.objects.get(id=c["id"]).spawn_seq for c in body["items"]])
        assert all(c["parent"] == parent for c in body["items"])
        if not (cursor := body["next_cursor"]):
            break
    assert pages == [[7, 6, 5], [4, 3, 2], [1]]
    assert len(alice.get("tasks", root=parent).json()["items"]) == 7


def test_a_new_task_answers_where_it_is_and_a_replayed_key_does_not(alice):
    made = submit(alice, key="located")
    assert made.status_code == 201
    location = made["Location"]
    assert location == f"/api/v1/tasks/{made.json()['id']}"
    assert alice.get(location).json()["id"] == made.json()["id"]
    assert "Location" not in submit(alice, key="located")  # 200: the task made earlier, nothing created


def test_the_task_detail_names_its_lease_holder_as_the_console_does(alice, client, people):
    from runtime.models import Attempt

    idle = submit(alice).json()["id"]
    assert alice.get(f"tasks/{idle}").json()["lease_holder"] is None  # queued: no attempt holds it
    task = Task.objects.get(id=submit(alice).json()["id"])
    now = timezone.now()
    Task.objects.filter(id=task.id).update(status="running", epoch=1)
    Attempt.objects.create(
        task=task,
        epoch=1,
        worker="worker:host-7:4242",
        reason="first",
        started_at=now,
        heartbeat_at=now,
        lease_expires_at=now + timedelta(seconds=30),
    )
    holder = alice.get(f"tasks/{task.id}").json()["lease_holder"]
    assert (holder["worker"], holder["epoch"], holder["expired"]) == ("worker:host-7:4242", 1, False)
    client.force_login(people.alice)
    assert "worker:host-7:4242" in client.get(f"/tasks/{task.id}/").content.decode()
    Attempt.objects.filter(task=task).update(lease_expires_at=now - timedelta(seconds=1))
    assert alice.get(f"tasks/{task.id}").json()["lease_holder"]["expired"] is True
    Attempt.objects.filter(task=task).update(ended_at=now, end_reason="crash")
    assert alice.get(f"tasks/{task.id}").json()["lease_holder"] is None


def test_a_created_range_before_the_epoch_or_past_datetimes_range_bounds_as_asked(alice):
    """Ids carry their creation millisecond: a bound before 1970 was masked into the
    far future (created_after=1969-... listed nothing). A time whose UTC falls outside
    years 1 to 9999 compares as that range's end, as it would compare with any stored time."""
    made = {submit(alice).json()["id"] for _ in range(2)}

    def listed(**query):
        return {t["id"] for t in alice.get("tasks", **query).json()["items"]}

    assert listed(created_after="1969-12-31T23:59:59Z") == made
    assert listed(created_after="0001-01-01T00:00:00Z") == made
    assert listed(created_after="0001-01-01T00:00:00+05:00") == made
    assert listed(created_before="1969-12-31T23:59:59Z") == set()
    assert listed(created_before="0001-01-01T00:00:00+05:00") == set()
    assert listed(created_before="9999-12-31T23:59:59.999999-23:59") == made
    events = alice.get("audit", until="9999-12-31T23:59:59.999999-23:59").json()["items"]
    assert {e["task"] for e in events} >= made
