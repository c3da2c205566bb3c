"""The same agents, in process and isolated (isolation in (None, "process")), on the
public harness (runtime/testing.py): replay across a durable sleep, a crash at each kill
point and its recovery, and approvals behave alike. The agents are tests/isolated_agents.py's,
each registered both ways.

`process`: an isolated attempt starts a sandbox.
"""

from __future__ import annotations

import pytest

from runtime import states
from runtime.models import Effect
from runtime.testing import StewardTestEnv
from tests.isolated_agents import named

pytestmark = pytest.mark.process

MODES = [pytest.param(None, id="in-process"), pytest.param("process", id="isolated")]


@pytest.fixture
def steward(transactional_db):
    with StewardTestEnv() as env:
        yield env


@pytest.mark.parametrize("isolation", MODES)
def test_a_second_attempt_replays_the_first_across_a_sleep(steward, isolation):
    task = steward.submit(named("iso.steps", isolation), {"n": 3, "nap": 60})
    steward.run_until_idle()
    assert steward.result(task).status == states.SLEEPING
    first = [(r.seq, r.kind, r.name, r.output) for r in steward.journal(task)]

    steward.advance(61)
    steward.run_until_idle()
    result = steward.result(task)
    assert result.status == states.COMPLETED, result.error
    journal = steward.journal(task)
    # The first attempt's rows are untouched; the second only added after them, in order.
    assert [(r.seq, r.kind, r.name, r.output) for r in journal][: len(first)] == first
    assert [r.seq for r in journal] == list(range(len(journal)))
    assert [r.name for r in journal] == ["first", "now", "random", "send", "sleep", "fails", "last"]
    # What the agent saw on replay is what the first attempt recorded.
    recorded = {r.name: r.output for r in journal}
    assert result.output["now"] == recorded["now"] and result.output["draw"] == recorded["random"]
    assert result.output["sent"] == recorded["send"]
    assert result.output["caught"] == "ZeroDivisionError" and result.output["last"] == 4
    assert result.output["epoch"] == 2
    assert Effect.objects.filter(task_id=task).count() == 1


# A kill at each point of iso.steps' first attempt, then recovery: (point, step, the
# effect's state after recovery). The irreversible effect is sent once or, when the kill
# left its outcome unknown, never again.
KILLS = [
    ("between_steps", "first", states.COMMITTED),
    ("before_step_journal", "first", states.COMMITTED),
    ("after_receipt_before_journal", "send", states.COMMITTED),
    ("between_steps", "last", states.COMMITTED),
    ("after_effect_before_receipt", "send", states.UNKNOWN),
    ("before_status", "complete", states.COMMITTED),
]


@pytest.mark.parametrize("isolation", MODES)
@pytest.mark.parametrize(("point", "step", "effect_state"), KILLS, ids=[f"{p}@{s}" for p, s, _ in KILLS])
def test_a_crash_at_each_point_recovers_by_replay_and_never_sends_twice(steward, isolation, point, step, effect_state):
    task = steward.submit(named("iso.steps", isolation), {"n": 2})
    steward.crash_at(point, step=step)
    steward.run_until_idle()
    assert len(steward.crashes) == 1
    sent_before = list(Effect.objects.filter(task_id=task).values_list("receipt", flat=True))

    steward.expire_leases()
    steward.run_until_idle()
    result = steward.result(task)
    (effect,) = Effect.objects.filter(task_id=task)
    assert effect.state == effect_state
    if effect_state == states.COMMITTED:
        assert result.status == states.COMPLETED, result.error
        assert result.epoch == 2
        # The receipt is the first run's when it was committed before the kill: not re-sent.
        if sent_before and sent_before[0] is not None:
            assert result.output["sent"] == sent_before[0]
        assert [r.seq for r in steward.journal(task)] == list(range(len(steward.journal(task))))
    else:
        assert result.status == states.BLOCKED  # an irreversible effect in doubt waits for a person


@pytest.mark.parametrize("isolation", MODES)
@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_an_approval_holds_no_worker_and_is_acted_on_once(steward, isolation, decision):
    task = steward.submit(named("iso.approve", isolation), {"amount": 7})
    steward.run_until_idle()
    result = steward.result(task)
    assert (result.status, result.blocked_reason) == (states.BLOCKED, states.APPROVAL_PENDING)
    (package,) = steward.approvals(task)
    assert package.action == {"pay": 7}

    getattr(steward, decision)(task)
    steward.run_until_idle()
    result = steward.result(task)
    assert result.status == states.COMPLETED, result.error
    if decision == "approve":
        assert result.output["state"] == states.CONSUMED
        assert Effect.objects.filter(task_id=task, state=states.COMMITTED).count() == 1
    else:
        assert result.output == {"state": states.DENIED}
        assert not Effect.objects.filter(task_id=task).exists()
