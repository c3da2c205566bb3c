"""Breakers (runtime/limits/breakers.py): a spawn past a fan-out limit, or a step past a
runaway limit, blocks the task for an operator with the breaker named on its row, in its
error and in `task.blocked` (a fan-out trip also pauses the rest of its tree:
tests/runtime/test_tree_pause.py); nothing re-runs it by itself; an operator's resume,
with the task's limit raised, carries on from the journal. Attempts run in this process (the
worker-process case is tests/integration/test_breakers.py)."""

from __future__ import annotations

import pytest

from runtime import agents, arguments, states
from runtime.errors import ArgumentOutOfRange, InvalidArgument, InvalidTransition
from runtime.limits.breakers import limits_for
from runtime.models import Attempt, AuditEvent, Step, Task
from runtime.tasks.services import task_resume
from runtime.worker.supervisor import sweep
from tests.runtime.inprocess import run, submit, wake
from tests.runtime.test_cli import refused, steward

pytestmark = pytest.mark.usefixtures("transactional_db")


def task(task_id) -> Task:
    return Task.objects.get(id=task_id)


def blocked_event(task_id) -> AuditEvent:
    return AuditEvent.objects.filter(task_id=task_id, kind="task.blocked").order_by("-chain_seq").first()


def assert_tripped(task_id, breaker: str, *, limit: int, observed) -> Task:
    t = task(task_id)
    assert (t.status, t.blocked_reason, t.breaker) == (states.BLOCKED, states.BREAKER_TRIPPED, breaker)
    assert (t.error["code"], t.error["breaker"], t.error["limit"], t.error["observed"]) == (
        "BREAKER_TRIPPED",
        breaker,
        limit,
        observed,
    )
    assert breaker in t.error["message"] and "resume" in t.status_note
    event = blocked_event(task_id)
    assert (event.data["blocked_reason"], event.data["breaker"], event.data["limit"], event.data["observed"]) == (
        states.BREAKER_TRIPPED,
        breaker,
        limit,
        observed,
    )
    assert Attempt.objects.filter(task_id=task_id).order_by("-epoch").first().end_reason == "trip"
    return t


def children_of(task_id) -> int:
    return Task.objects.filter(parent_id=task_id).count()


# --- fan-out -------------------------------------------------------------------------------


def test_a_spawn_past_the_childrens_maximum_blocks_the_task_and_journals_nothing():
    t = submit("t.fanout", {"n": 5})
    run()
    assert_tripped(t, states.FANOUT_CHILDREN, limit=3, observed=4)
    assert children_of(t) == 3
    # The three spawns are journaled; the refused fourth is not, so a resume asks again.
    assert list(Step.objects.filter(task_id=t).order_by("seq").values_list("kind", flat=True)) == ["spawn"] * 3
    # The tree is paused: the three children, queued, are held for the operator too
    # (tests/runtime/test_tree_pause.py).
    assert [(c.status, c.blocked_reason) for c in Task.objects.filter(parent_id=t)] == [
        (states.BLOCKED, states.TREE_PAUSED)
    ] * 3
    # Nothing re-runs it by itself.
    sweep(supervisor_id="test")
    assert run() == 0 and task(t).status == states.BLOCKED


def test_resuming_without_raising_the_limit_trips_again_and_raising_it_completes_the_task():
    t = submit("t.fanout", {"n": 5})
    run()
    task_resume(task_id=t, actor="user:alice", note="try again")
    run()
    assert_tripped(t, states.FANOUT_CHILDREN, limit=3, observed=4)
    assert children_of(t) == 3

    task_resume(task_id=t, actor="user:alice", note="five is fine", limits={"max_children": 5})
    run()
    done = task(t)
    assert (done.status, done.output, done.breaker, done.blocked_reason) == (
        states.COMPLETED,
        {"values": [0, 2, 4, 6, 8]},
        None,
        None,
    )
    assert done.breaker_limits == {"max_children": 5} and children_of(t) == 5
    resumed = AuditEvent.objects.filter(task_id=t, kind="task.resumed").order_by("chain_seq").last()
    assert (resumed.actor, resumed.data["breaker"], resumed.data["limits"]) == (
        "user:alice",
        states.FANOUT_CHILDREN,
        {"max_children": 5},
    )


def test_a_spawn_deeper_than_the_trees_maximum_blocks_the_spawner_and_pauses_its_waiting_ancestors():
    root = submit("t.deep", {"levels": 5})
    run()
    chain = [root]
    while (kid := Task.objects.filter(parent_id=chain[-1]).first()) is not None:
        chain.append(kid.id)
    # The root is at depth 0: depths 1 and 2 are admitted, the third level is refused.
    assert len(chain) == 3
    assert_tripped(chain[-1], states.FANOUT_DEPTH, limit=2, observed=3)
    assert [(task(i).status, task(i).blocked_reason) for i in chain[:-1]] == [(states.BLOCKED, states.TREE_PAUSED)] * 2
    assert all(task(i).root_id == root for i in chain)


def test_a_burst_of_spawns_past_the_trees_rate_blocks_the_task():
    t = submit("t.fanrate", {"n": 6})
    run()
    assert_tripped(t, states.FANOUT_RATE, limit=4, observed=5)
    assert children_of(t) == 4
    task_resume(task_id=t, actor="user:alice", limits={"max_spawns_per_minute": 100})
    run()
    assert task(t).status == states.COMPLETED and children_of(t) == 6


# --- runaway -------------------------------------------------------------------------------


def test_a_step_past_the_maximum_blocks_the_task_before_the_step_runs():
    t = submit("t.loop", {"steps": 8})
    run()
    assert_tripped(t, states.RUNAWAY_STEPS, limit=5, observed=6)
    assert Step.objects.filter(task_id=t).count() == 5


def test_agent_code_that_catches_the_breakers_refusal_still_blocks_the_task():
    t = submit("t.loop", {"steps": 8, "swallow": True})
    run()
    assert_tripped(t, states.RUNAWAY_STEPS, limit=5, observed=6)
    assert task(t).output is None


def test_a_resume_with_more_steps_replays_the_journal_and_runs_only_the_rest():
    t = submit("t.loop", {"steps": 8})
    run()
    task_resume(task_id=t, actor="user:alice", limits={"max_steps": 20})
    run()
    done = task(t)
    assert (done.status, done.output) == (states.COMPLETED, {"done": 8})
    assert list(Step.objects.filter(task_id=t).order_by("seq").values_list("epoch", flat=True)) == [1] * 5 + [2] * 3


def test_wall_clock_counts_a_durable_sleep_and_trips_at_the_step_after_it():
    t = submit("t.lingers", {"nap": 1.2})
    run()
    assert task(t).status == states.SLEEPING
    wake()
    run()
    tripped = assert_tripped(t, states.RUNAWAY_WALL_CLOCK, limit=1, observed=task(t).error["observed"])
    assert tripped.error["observed"] >= 1.2  # measured from the first start, the nap included
    # The step before the nap and the nap are journaled; the one after it never ran.
    assert list(Step.objects.filter(task_id=t).order_by("seq").values_list("name", flat=True)) == ["before", "sleep"]
    task_resume(task_id=t, actor="user:alice", limits={"max_wall_clock_seconds": 3600})
    run()
    assert (task(t).status, task(t).output) == (states.COMPLETED, {"after": 2})


# --- where the limits come from, and what is refused ----------------------------------------


def test_an_operators_limit_overrides_the_agents_which_overrides_the_fleets(settings):
    settings.STEWARD = {
        **settings.STEWARD,
        "BREAKERS": {**settings.STEWARD["BREAKERS"], "max_steps": 7, "max_children": 9},
    }
    assert limits_for("t.steps")["max_steps"] == 7
    assert limits_for("t.loop")["max_steps"] == 5  # the agent's declaration
    assert limits_for("t.loop", {"max_steps": 50})["max_steps"] == 50
    assert limits_for("t.loop")["max_children"] == 9  # what the agent does not declare


def test_the_fleets_limit_applies_to_an_agent_that_declares_none(settings):
    settings.STEWARD = {**settings.STEWARD, "BREAKERS": {**settings.STEWARD["BREAKERS"], "max_steps": 2}}
    t = submit("t.steps", {"n": 3})
    run()
    assert_tripped(t, states.RUNAWAY_STEPS, limit=2, observed=3)


HOSTILE = [
    ({"max_steps": 0}, ArgumentOutOfRange),
    ({"max_steps": -1}, ArgumentOutOfRange),
    ({"max_steps": 2**31}, ArgumentOutOfRange),
    ({"max_children": 10**30}, ArgumentOutOfRange),
    ({"max_depth": True}, ArgumentOutOfRange),
    ({"max_wall_clock_seconds": 1.5}, ArgumentOutOfRange),
    ({"max_wall_clock_seconds": float("nan")}, ArgumentOutOfRange),
    ({"max_spawns_per_minute": "10"}, ArgumentOutOfRange),
    ({"max_steps": None}, ArgumentOutOfRange),
    ({"max_stepz": 5}, InvalidArgument),
    ({"\x1b[2J": 5}, InvalidArgument),
    ([("max_steps", 5)], InvalidArgument),
    ("max_steps=5", InvalidArgument),
]


@pytest.mark.parametrize("limits, refusal", HOSTILE, ids=[repr(h[0])[:40] for h in HOSTILE])
def test_a_hostile_limit_is_refused_with_its_code_and_changes_nothing(limits, refusal):
    t = submit("t.loop", {"steps": 8})
    run()
    before = AuditEvent.objects.filter(task_id=t).count()
    with pytest.raises(refusal) as caught:
        task_resume(task_id=t, actor="user:alice", limits=limits)
    assert caught.value.code == refusal.code and "\x1b" not in caught.value.message
    assert (task(t).status, task(t).breaker_limits) == (states.BLOCKED, None)
    assert AuditEvent.objects.filter(task_id=t).count() == before


@pytest.mark.parametrize("breakers", [{"max_steps": 0}, {"max_depht": 3}, {"max_children": "many"}])
def test_an_agent_declaring_a_hostile_limit_is_refused_at_import(breakers):
    with pytest.raises(ValueError, match="t.hostile_limits"):
        agents.agent("t.hostile_limits", breakers=breakers)(lambda ctx, input: None)


def test_every_limit_has_a_fleet_default_within_its_bound(settings):
    fleet = settings.STEWARD["BREAKERS"]
    assert sorted(fleet) == sorted(arguments.BREAKER_LIMITS)
    assert arguments.breaker_limits(fleet) == fleet


def test_a_task_blocked_on_an_unknown_effect_is_still_not_resumed_by_raising_a_limit():
    t = submit("t.loop", {"steps": 8})
    run()
    Task.objects.filter(id=t).update(blocked_reason=states.EFFECT_UNKNOWN, breaker=None)
    with pytest.raises(InvalidTransition, match="unknown effect"):
        task_resume(task_id=t, actor="user:alice", limits={"max_steps": 100})


# --- the CLI -----------------------------------------------------------------------------


def test_the_cli_shows_the_breaker_and_resume_raises_the_limit():
    t = submit("t.loop", {"steps": 8})
    run()
    shown = steward("show", str(t))
    assert "breaker_tripped, breaker runaway_steps" in shown and "resume --limit NAME=N" in shown
    said = steward("resume", str(t), "--limit", "max_steps=8", "--note", "eight")
    assert "limits max_steps=8" in said and task(t).breaker_limits == {"max_steps": 8}
    run()
    assert task(t).status == states.COMPLETED


@pytest.mark.parametrize(
    "given, code",
    [
        ("max_steps=0", "ARGUMENT_OUT_OF_RANGE"),
        ("max_steps=" + "9" * 5000, "ARGUMENT_OUT_OF_RANGE"),
        ("max_steps=٣", "ARGUMENT_OUT_OF_RANGE"),
        ("max_steps=1.5", "ARGUMENT_OUT_OF_RANGE"),
        ("max_steps", "INVALID_ARGUMENT"),
        ("max_stepz=5", "INVALID_ARGUMENT"),
    ],
)
def test_the_cli_refuses_a_hostile_limit_with_its_code(given, code):
    t = submit("t.loop", {"steps": 8})
    run()
    assert refused("resume", str(t), "--limit", given).startswith(f"{code}:")
    assert (task(t).status, task(t).breaker_limits) == (states.BLOCKED, None)
