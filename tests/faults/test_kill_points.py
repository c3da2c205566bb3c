"""kill -9 at each fault injection point of t.effect, against a keyed service: every
trial's task completes, its effect is performed exactly once and has one ledger row,
and no task is lost.

Every worker is armed with the point. A point fires once per task across all processes
(runtime/faults.py), so the worker that first reaches it for a task holds still there
and is killed, while whichever worker runs the recovery passes through. Trials run in
parallel: the test watches the fault dir, SIGKILLs each worker named by a new marker,
and starts an armed replacement for it; two supervisors recover the expired leases.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import pytest

from runtime import states
from runtime.models import Effect, Task
from tests.faults.support import (
    admitted_in,
    armed,
    attempts_of,
    held_slots,
    markers,
    sigkill,
    start_workers,
    submit,
    wait_nothing_held,
    worker_name,
)
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


@dataclass(frozen=True)
class Expect:
    calls: int  # calls the service sees for the key (a re-send is deduplicated)
    sends: int  # Effect.sends: times the ledger handed it to the service
    effect_epoch: int  # the attempt that last sent it


# What recovery must do after a kill at each point of t.effect (tests/agents.py).
POINTS = {
    # The prepare step is journaled, the effect not begun: recovery replays prepare, sends once.
    "between_steps@prepare": Expect(calls=1, sends=1, effect_epoch=2),
    # No intent yet: recovery records the intent and sends once.
    "before_effect@submit": Expect(calls=1, sends=1, effect_epoch=2),
    # The service acted, no receipt: recovery re-sends under the same key and is deduplicated.
    "after_effect_before_receipt@submit": Expect(calls=2, sends=2, effect_epoch=2),
    # The receipt is committed, the journal row is not: recovery reads the ledger, sends nothing.
    "after_receipt_before_journal@submit": Expect(calls=1, sends=1, effect_epoch=1),
}
DEFAULT_TRIALS = 2
STRESS_TRIALS = 20
WORKERS = 4  # armed workers alive at any time; each killed one is replaced


def run_trials(fleet, fake, fault_dir, point: str, trials: int) -> Counter:
    """Run `trials` kill-at-`point` trials in parallel; return the counted outcomes."""
    started = time.monotonic()
    env = armed(fault_dir, point)
    fleet.supervisors(2)
    fleet.workers(min(WORKERS, trials), env=env)
    tasks = [submit("t.effect", {"url": fake.url, "keyed": True}).task_id for _ in range(trials)]

    killed: dict[str, int] = {}  # task id -> pid of the worker killed at the point

    def progress():
        """New markers to act on, or True once every task is terminal."""
        fresh = [data for data in markers(fault_dir).values() if data["task"] not in killed]
        return fresh or Task.objects.filter(id__in=tasks, status__in=states.TERMINAL).count() == trials

    deadline = time.monotonic() + 30 + 5 * trials
    while True:
        try:
            fresh = wait_until(progress, timeout=deadline - time.monotonic(), interval=0.05)
        except AssertionError:
            break  # out of time: the verdicts below say which tasks were lost, and how
        if fresh is True:
            break
        for data in fresh:  # a marker from a later epoch fails the trial's "killed" verdict
            sigkill(fleet, data["pid"])
            killed[data["task"]] = data["pid"]
        start_workers(fleet, len(fresh), env=env)  # killed workers are replaced, armed too

    outcomes = Counter()
    problems = []
    performed = fake.performed_by_key()
    calls = Counter(call["key"] for call in fake.calls())
    for task_id in tasks:
        trial = _judge(task_id, killed.get(str(task_id)), POINTS[point], performed, calls)
        outcomes.update(name for name, held in trial.items() if held)
        if not all(trial.values()):
            problems.append(_describe(task_id, performed, calls, trial))
    outcomes["duplicates"] = sum(performed.values()) - len(performed)
    outcomes["lost"] = trials - outcomes["completed"]
    outcomes["seconds"] = round(time.monotonic() - started, 1)
    print(f"\n[kill {point}] trials={trials} {dict(outcomes)}")
    assert problems == []
    assert outcomes["completed"] == outcomes["killed"] == outcomes["one ledger row"] == trials
    assert outcomes["duplicates"] == 0 and outcomes["lost"] == 0
    assert len(performed) == trials and sum(performed.values()) == trials
    wait_nothing_held()
    assert held_slots() == [] and admitted_in("default") == 0
    return outcomes


def _judge(task_id, pid, expect: Expect, performed: dict, calls: Counter) -> dict[str, bool]:
    """One trial's verdicts: each must hold."""
    task = Task.objects.get(id=task_id)
    effects = list(Effect.objects.filter(task_id=task_id))
    effect = effects[0] if effects else None
    return {
        "completed": task.status == states.COMPLETED,
        "killed": pid is not None and task.attempts.filter(epoch=1, worker=worker_name(pid)).exists(),
        "one ledger row": len(effects) == 1,
        "performed once": effect is not None and performed.get(effect.key) == 1,
        "recovered once": attempts_of(task_id)
        == [(1, states.FIRST, "lease_expired"), (2, states.RECOVERY, "complete")],
        "ledger as expected": effect is not None
        and calls[effect.key] == expect.calls
        and (effect.state, effect.sends, effect.epoch) == (states.COMMITTED, expect.sends, expect.effect_epoch)
        and task.output == {"receipt": effect.receipt},
    }


def _describe(task_id, performed: dict, calls: Counter, trial: dict) -> dict:
    task = Task.objects.get(id=task_id)
    effects = list(Effect.objects.filter(task_id=task_id).values("key", "state", "sends", "epoch"))
    return {
        "task": str(task_id),
        "status": task.status,
        "failed": [k for k, v in trial.items() if not v],
        "attempts": attempts_of(task_id),
        "effects": effects,
        "performed": [performed.get(e["key"]) for e in effects],
        "calls": [calls[e["key"]] for e in effects],
    }


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_each_point_completes_every_task_with_one_effect(live, fleet, fake, tmp_path, point):
    outcomes = run_trials(fleet, fake, tmp_path, point, DEFAULT_TRIALS)
    assert (outcomes["completed"], outcomes["duplicates"], outcomes["lost"]) == (DEFAULT_TRIALS, 0, 0)


@pytest.mark.stress
@pytest.mark.parametrize("point", POINTS)
def test_many_kills_at_each_point_never_duplicate_or_lose_a_task(live, fleet, fake, tmp_path, point):
    outcomes = run_trials(fleet, fake, tmp_path, point, STRESS_TRIALS)
    assert (outcomes["completed"], outcomes["duplicates"], outcomes["lost"]) == (STRESS_TRIALS, 0, 0)
