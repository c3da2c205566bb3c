"""Breakers over the API: a tripped task says which breaker, its limit and what was
observed; a resume may raise that task's limits, and a hostile limit is a 4xx with a
stable code that changes nothing; a viewer cannot resume, another tenant sees nothing."""

from __future__ import annotations

import pytest

from runtime import states
from runtime.models import AuditEvent, Task, TreePause
from tests.api.conftest import Api, assert_error
from tests.runtime.inprocess import run

pytestmark = pytest.mark.usefixtures("transactional_db")


def tripped(alice: Api) -> str:
    task_id = alice.post("tasks", {"agent": "t.loop", "input": {"steps": 8}}).json()["id"]
    run()
    return task_id


def test_a_tripped_task_names_its_breaker_and_a_resume_raises_its_limit(alice):
    task_id = tripped(alice)
    shown = alice.get(f"tasks/{task_id}").json()
    assert (shown["status"], shown["blocked_reason"], shown["breaker"], shown["breaker_limits"]) == (
        "blocked",
        states.BREAKER_TRIPPED,
        states.RUNAWAY_STEPS,
        None,
    )
    assert (shown["error"]["code"], shown["error"]["limit"], shown["error"]["observed"]) == ("BREAKER_TRIPPED", 5, 6)

    resumed = alice.post(f"tasks/{task_id}/resume", {"note": "it needs eight", "limits": {"max_steps": 8}})
    assert resumed.status_code == 200, resumed.content
    body = resumed.json()
    assert (body["status"], body["breaker"], body["breaker_limits"]) == ("queued", None, {"max_steps": 8})
    run()
    assert alice.get(f"tasks/{task_id}").json()["output"] == {"done": 8}


@pytest.mark.parametrize(
    "limits, status, code",
    [
        ({"max_steps": 0}, 400, "ARGUMENT_OUT_OF_RANGE"),
        ({"max_steps": -5}, 400, "ARGUMENT_OUT_OF_RANGE"),
        ({"max_steps": 2**63}, 400, "ARGUMENT_OUT_OF_RANGE"),
        ({"max_steps": 1e308}, 400, "ARGUMENT_OUT_OF_RANGE"),
        ({"max_steps": True}, 400, "ARGUMENT_OUT_OF_RANGE"),
        ({"max_steps": "8"}, 400, "ARGUMENT_OUT_OF_RANGE"),
        ({"max_steps": {"value": 8}}, 400, "ARGUMENT_OUT_OF_RANGE"),
        ({"max_steps": None}, 400, "ARGUMENT_OUT_OF_RANGE"),
        ({"budget": 8}, 400, "INVALID_ARGUMENT"),
        ({"": 8}, 400, "INVALID_ARGUMENT"),
        ([8], 422, "INVALID_REQUEST"),
        ("max_steps=8", 422, "INVALID_REQUEST"),
    ],
)
def test_a_hostile_limit_is_refused_with_a_stable_code_and_changes_nothing(alice, limits, status, code):
    task_id = tripped(alice)
    before = AuditEvent.objects.filter(task_id=task_id).count()
    assert_error(alice.post(f"tasks/{task_id}/resume", {"limits": limits}), status, code)
    task = Task.objects.get(id=task_id)
    assert (task.status, task.breaker, task.breaker_limits) == ("blocked", states.RUNAWAY_STEPS, None)
    assert AuditEvent.objects.filter(task_id=task_id).count() == before


def test_a_viewer_cannot_raise_a_limit_and_another_tenant_is_told_nothing(alice, tokens, carol):
    task_id = tripped(alice)
    assert_error(Api(tokens.bob).post(f"tasks/{task_id}/resume", {"limits": {"max_steps": 8}}), 403)
    assert_error(carol.post(f"tasks/{task_id}/resume", {"limits": {"max_steps": 8}}), 404)
    assert Task.objects.get(id=task_id).breaker_limits is None


def test_a_paused_tree_shows_its_pause_and_a_resume_says_what_it_lifted(alice):
    root = alice.post("tasks", {"agent": "t.grove", "input": {"saplings": 0, "steps": 0, "nap": 3600}}).json()["id"]
    run()
    pause = TreePause.objects.get(root_id=root)
    detail = alice.get(f"tasks/{root}").json()
    assert detail["blocked_reason"] == states.TREE_PAUSED
    assert detail["error"]["code"] == "TREE_PAUSED"
    shown = detail["tree_pause"]
    assert (
        shown["id"],
        shown["tripped_task"],
        shown["breaker"],
        shown["limit"],
        shown["observed"],
        shown["held_at_pause"],
        shown["holding"],
        shown["running"],
    ) == (pause.id, str(pause.task_id), states.FANOUT_CHILDREN, 1, 2, 3, 3, 0)

    answer = alice.post(f"tasks/{root}/resume", {"note": "the rest may go on"})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["tree_pause_lifted"], body["tree_queued"], body["tree_pause"], body["status"]) == (
        pause.id,
        2,
        None,
        states.QUEUED,
    )
    assert Task.objects.get(id=pause.task_id).blocked_reason == states.BREAKER_TRIPPED  # resumed on its own
