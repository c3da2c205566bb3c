"""A worker's database connection dies under it (pg_terminate_backend, as a failover or
an operator would do it) at each point of an attempt. An infrastructure error is never
the agent's error: the attempt yields, the task is retried and completes, the effect is
settled by its key, and the worker process keeps running, logging the outage once.

Each trial arms one worker with a fault point, waits for it to hold still there,
terminates every backend of that process, and lets it go on: its next statement meets
a dead connection.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest

from runtime import states
from runtime.models import AuditEvent, Effect, Task
from tests.faults.services import terminate_backends
from tests.faults.support import (
    admitted_in,
    armed,
    attempts_of,
    held_slots,
    release,
    submit,
    wait_marker,
    wait_nothing_held,
)
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


@dataclass(frozen=True)
class Expect:
    attempts: list  # (epoch, reason, end) of every attempt, in order
    calls: int  # calls the keyed service sees (a re-send is deduplicated)
    sends: int  # Effect.sends


YIELDED = [(1, states.FIRST, "yield"), (2, states.RETRY, "complete")]

# Where t.effect (tests/agents.py) loses its connection, and what must follow.
POINTS = {
    # A connection in hand, the claim not yet sent: the claim is retried on a fresh one.
    "before_claim@claim": Expect(attempts=[(1, states.FIRST, "complete")], calls=1, sends=1),
    # Inside a step (journaled; the next not begun): the next journal write fails, the attempt yields.
    "between_steps@prepare": Expect(attempts=YIELDED, calls=1, sends=1),
    # Inside the effect call: the service acted, the receipt cannot be written. The
    # retry re-sends under the same key and the service deduplicates.
    "after_effect_before_receipt@submit": Expect(attempts=YIELDED, calls=2, sends=2),
    # The agent returned; the attempt's end cannot be written. The retry replays it all.
    "before_status@complete": Expect(attempts=YIELDED, calls=1, sends=1),
}
DEFAULT_TRIALS = 2
STRESS_TRIALS = 20


def run_trials(fleet, fake, fault_dir, point: str, trials: int) -> Counter:
    fleet.supervisors(1)
    (worker,) = fleet.workers(1, env=armed(fault_dir, point))
    outcomes = Counter()
    expect = POINTS[point]
    for trial in range(trials):
        task_id = submit("t.effect", {"url": fake.url, "keyed": True}).task_id
        marker, held = wait_marker(fault_dir, "default" if point.startswith("before_claim") else task_id, point)
        assert held["pid"] == worker.pid
        killed = terminate_backends(worker.pid)
        release(marker)

        task = wait_until(
            lambda: Task.objects.filter(id=task_id, status__in=states.TERMINAL).first(),
            timeout=30,
            message="the task to finish",
        )
        (effect,) = Effect.objects.filter(task_id=task_id)
        calls = sum(1 for call in fake.calls() if call["key"] == effect.key)
        kinds = set(AuditEvent.objects.filter(task_id=task_id).values_list("kind", flat=True))
        # It is still a working worker: it answers a ping, and logged the outage once each way.
        worker.wait_ready(timeout=20)
        log = worker.output()
        verdicts = {
            "backend terminated": killed >= 1,
            "completed": task.status == states.COMPLETED,
            "never failed": "task.failed" not in kinds,
            "attempts as expected": attempts_of(task_id) == expect.attempts,
            "performed once": fake.performed_by_key().get(effect.key) == 1,
            "ledger as expected": (effect.state, effect.sends, calls) == (states.COMMITTED, expect.sends, expect.calls),
            "worker alive": worker.alive(),
            "outage logged once": log.count("database unavailable") == log.count("database back after") == trial + 1,
        }
        outcomes.update(name for name, ok in verdicts.items() if ok)
        assert all(verdicts.values()), log[-3000:] + str(
            {
                "trial": trial,
                "failed": [k for k, ok in verdicts.items() if not ok],
                "attempts": attempts_of(task_id),
                "effect": (effect.state, effect.sends),
                "calls": calls,
            }
        )
        for path in (marker, marker.with_name(marker.name + ".release")):  # re-arm the point
            path.unlink()
    wait_nothing_held()
    assert held_slots() == [] and admitted_in("default") == 0
    print(f"\n[terminate backend at {point}] trials={trials} {dict(outcomes)}")
    return outcomes


@pytest.mark.parametrize("point", POINTS)
def test_a_lost_connection_at_each_point_yields_and_the_task_completes(live, fleet, fake, tmp_path, point):
    outcomes = run_trials(fleet, fake, tmp_path, point, DEFAULT_TRIALS)
    assert outcomes["completed"] == outcomes["performed once"] == DEFAULT_TRIALS


@pytest.mark.stress
@pytest.mark.parametrize("point", POINTS)
def test_many_lost_connections_at_each_point_never_fail_or_duplicate(live, fleet, fake, tmp_path, point):
    outcomes = run_trials(fleet, fake, tmp_path, point, STRESS_TRIALS)
    assert outcomes["completed"] == outcomes["performed once"] == STRESS_TRIALS
