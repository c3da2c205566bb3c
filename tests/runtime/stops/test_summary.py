"""The stop summary and the stop preview (runtime/stops/selectors.py): each boundary's
row in words, the bound, the effects before and in flight, and the tenant's walls."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runtime import states
from runtime.errors import StopNotFound, TaskNotFound
from runtime.models import Effect, Task
from runtime.stops.selectors import agent_stop_preview, agent_switch, stop_preview, stop_summary
from runtime.stops.services import agent_reopen, agent_stop, stop_ack, stops_settle_due, task_stop
from tests.console.world import attempt, submit

pytestmark = pytest.mark.django_db


def running(tenant: str = "acme", owner: str = "alice", **input) -> Task:
    task = submit(tenant, owner, **input)
    Task.objects.filter(id=task.id).update(status=states.RUNNING)
    attempt(task)
    return Task.objects.get(id=task.id)


def effect(task: Task, seq: int, state: str, *, settled_ago: float | None = None) -> Effect:
    at = task.attempts.order_by("-epoch").first()
    return Effect.objects.create(
        key=f"{task.id}/{seq}/e",
        task=task,
        tenant=task.tenant,
        step_seq=seq,
        name=f"e{seq}",
        effect_class="irreversible",
        keyed=False,
        state=state,
        request_digest="ab" * 32,
        attempt=at,
        epoch=at.epoch,
        sends=1,
        settled_at=timezone.now() - timedelta(seconds=settled_ago) if settled_ago is not None else None,
    )


def states_of(summary) -> dict:
    return {(r.task_id, r.boundary): r.state for t in summary.tasks for r in t.rows}


def test_a_queued_task_is_cancelled_at_once_and_every_boundary_reads_acknowledged():
    task = submit("acme", "alice", n=1)
    started = task_stop(task_id=task.id, actor="user:alice", reason="not needed")
    summary = stop_summary(stop_id=started.stop_id, tenant="acme")
    assert summary.over and summary.stop.outcome == "acknowledged" and summary.outcome_words == "cancelled"
    assert summary.task_count == 1 and summary.acks == 4 and summary.complete
    assert set(states_of(summary).values()) == {"acknowledged"}
    assert summary.to_last_ack is not None and summary.to_last_ack >= timedelta(0)
    assert summary.unresolved == []


def test_a_running_task_waits_for_its_worker_then_reads_cancelled():
    task = running(n=1)
    started = task_stop(task_id=task.id, actor="user:alice", reason="runaway")
    summary = stop_summary(task_id=task.id, tenant="acme")
    assert not summary.over and summary.stopping == 1 and summary.outcome_words == "stopping"
    assert states_of(summary)[(task.id, states.WORKER)] == "waiting"
    assert summary.counts["waiting"] == 1 and "1 acknowledgment still awaited" in summary.unresolved
    assert stop_ack(task_id=task.id, boundary=states.WORKER, by="vm:1", detail={"ended": "cleanly"})
    summary = stop_summary(stop_id=started.stop_id, tenant="acme")
    assert summary.over and summary.complete and summary.tasks[0].task.status == states.CANCELLED
    row = next(r for r in summary.tasks[0].rows if r.boundary == states.WORKER)
    assert (row.state, row.by, row.detail) == ("acknowledged", "vm:1", {"ended": "cleanly"})


def test_past_its_bound_a_missing_worker_reads_missing_and_its_late_answer_reads_late():
    task = running(n=1)
    started = task_stop(task_id=task.id, actor="user:alice", reason="hung", bound_seconds=0.1)
    Task.objects.filter(id=task.id).update(stop_deadline=timezone.now() - timedelta(hours=1))
    assert stop_summary(task_id=task.id, tenant="acme").tasks[0].bound_passed
    assert stops_settle_due(actor="supervisor") == 1
    summary = stop_summary(task_id=task.id, tenant="acme")
    assert summary.over and summary.stop.outcome == "bounded" and summary.outcome_words == "cancelled at its bound"
    assert states_of(summary)[(task.id, states.WORKER)] == "missing"
    assert summary.tasks[0].missing == [states.WORKER]
    assert any("never came before the bound" in line for line in summary.unresolved)
    stop_ack(task_id=task.id, boundary=states.WORKER, by="vm:1", detail={"ended": "by force"}, stop_id=started.stop_id)
    summary = stop_summary(task_id=task.id, tenant="acme")
    assert states_of(summary)[(task.id, states.WORKER)] == "late"
    assert summary.tasks[0].task.status == states.CANCELLED  # a late answer changes nothing


def test_effects_committed_before_the_stop_are_apart_from_those_in_flight():
    task = running(n=1)
    before = effect(task, 1, states.COMMITTED, settled_ago=5)
    in_flight = effect(task, 2, states.INTENT)
    unknown = effect(task, 3, states.UNKNOWN)
    cut = effect(task, 4, states.PARTIAL)  # a gateway stream cut part-way: what came is known, not the rest
    task_stop(task_id=task.id, actor="user:alice", reason="enough")
    summary = stop_summary(task_id=task.id, tenant="acme")
    assert [e.id for e in summary.committed_before] == [before.id]
    assert [e.id for e in summary.in_flight] == [in_flight.id, unknown.id, cut.id]
    assert any("3 effects with no known outcome" in line for line in summary.unresolved)


def test_a_tree_lists_every_task_and_a_resumed_task_keeps_its_old_stop():
    parent = running(n=1)
    child = Task.objects.create(
        agent="t.steps",
        input={},
        input_digest="x",
        tenant="acme",
        owner="user:alice",
        pool_id=parent.pool_id,
        parent=parent,
        root=parent,
        spawn_seq=1,
        status=states.QUEUED,
    )
    preview = stop_preview(task_id=parent.id, tenant="acme")
    assert {t.id for t in preview.tasks} == {parent.id, child.id} and preview.count == 2
    started = task_stop(task_id=parent.id, actor="user:alice", reason="tree")
    summary = stop_summary(stop_id=started.stop_id, tenant="acme")
    assert [t.task.id for t in summary.tasks] == [parent.id, child.id]
    assert summary.task_count == 2 and summary.stopping == 1  # the child is cancelled; the parent waits its worker


def test_another_tenants_stop_and_task_are_not_found():
    task = submit("acme", "alice", n=1)
    started = task_stop(task_id=task.id, actor="user:alice", reason="x")
    with pytest.raises(StopNotFound):
        stop_summary(stop_id=started.stop_id, tenant="globex")
    with pytest.raises(TaskNotFound):
        stop_summary(task_id=task.id, tenant="globex")
    with pytest.raises(TaskNotFound):
        stop_preview(task_id=task.id, tenant="globex")
    with pytest.raises(StopNotFound):
        stop_summary(stop_id="not-a-uuid", tenant="acme")
    with pytest.raises(StopNotFound):
        stop_summary(task_id=submit("acme", "alice", n=2).id, tenant="acme")  # never stopped


def test_the_kill_switch_preview_and_state():
    a = running(n=1)
    b = submit("acme", "alice", n=2)
    submit("globex", "carol", n=1)
    preview = agent_stop_preview(tenant="acme", agent="t.steps")
    assert {t.id for t in preview.tasks} == {a.id, b.id}
    assert not agent_switch(tenant="acme", agent="t.steps").closed
    started = agent_stop(tenant="acme", agent="t.steps", actor="user:alice", reason="incident")
    state = agent_switch(tenant="acme", agent="t.steps")
    assert state.closed and state.stop_id == started.stop_id and state.reason == "incident"
    assert stop_summary(stop_id=started.stop_id, tenant="acme").task_count == 2
    assert agent_reopen(tenant="acme", agent="t.steps", actor="user:alice", reason="fixed")
    assert not agent_switch(tenant="acme", agent="t.steps").closed


def test_the_kill_switch_stops_a_child_of_its_own_agent_once():
    """Its roots are every live task of the agent: a child of the same agent is reached
    as a root and below its parent, and is stopped (and acknowledged) once."""
    parent = running(n=1)
    child = Task.objects.create(
        agent="t.steps",
        input={},
        input_digest="x",
        tenant="acme",
        owner="user:alice",
        pool_id=parent.pool_id,
        parent=parent,
        root=parent,
        spawn_seq=1,
        status=states.QUEUED,
    )
    started = agent_stop(tenant="acme", agent="t.steps", actor="user:alice", reason="incident")
    assert sorted(started.tasks) == sorted([parent.id, child.id]) and started.cancelled == [child.id]
    summary = stop_summary(stop_id=started.stop_id, tenant="acme")
    assert summary.task_count == 2 and summary.acks == 7  # the parent's worker is still to answer


def test_the_kill_switch_preview_reaches_live_tasks_of_other_agents_below_its_own():
    parent = running(n=1)
    done = Task.objects.create(
        agent="t.child",
        input={},
        input_digest="x",
        tenant="acme",
        owner="user:alice",
        pool_id=parent.pool_id,
        parent=parent,
        root=parent,
        spawn_seq=1,
        status=states.COMPLETED,
    )
    below = Task.objects.create(
        agent="t.child",
        input={},
        input_digest="y",
        tenant="acme",
        owner="user:alice",
        pool_id=parent.pool_id,
        parent=done,
        root=parent,
        spawn_seq=1,
        status=states.QUEUED,
    )
    preview = agent_stop_preview(tenant="acme", agent="t.steps")
    assert [t.id for t in preview.tasks] == [parent.id, below.id] and preview.count == 2
    assert agent_stop_preview(tenant="globex", agent="t.steps").count == 0
