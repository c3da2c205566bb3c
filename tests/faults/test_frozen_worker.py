"""A frozen worker that thaws writes nothing (docs/contracts.md §1, Ownership).

The first worker runs t.all_writes (a journaled step, a child, an effect, then its
status) and holds still just before one of those writes; the test freezes it with
SIGSTOP. Its heartbeat stops with it, the lease expires, a supervisor starts attempt 2
and a second worker finishes the task. Then the first worker is let go and thawed with
SIGCONT: the write it was about to make must be refused by its epoch, and recorded as
a `write.refused` audit event, while everything the replacement wrote stays as it is.
"""

from __future__ import annotations

import os
import signal

import pytest

from runtime import states
from runtime.models import Attempt, AuditEvent, Effect, Step, Task
from tests.faults.support import (
    admitted_in,
    armed,
    attempts_of,
    held_slots,
    release,
    submit,
    wait_marker,
    wait_nothing_held,
    worker_name,
)
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]

# (fault point, the write it precedes, the seq that write would have had). t.all_writes
# journals seq 0 "one", 1 "spawn:t.child", 2 "submit"; its status comes after them all.
CASES = [
    pytest.param("before_step_journal@one", "journal", 0, id="journal"),
    pytest.param("before_spawn@spawn:t.child", "child", 1, id="child"),
    pytest.param("before_effect@submit", "effect", 2, id="effect"),
    pytest.param("before_status@complete", "status", 3, id="status"),
]
STEPS = 3


def _written(task_id) -> dict:
    """What the task's records look like; the thawed worker must change none of it."""
    return {
        "task": Task.objects.filter(id=task_id).values("status", "epoch", "output", "error", "finished_at").get(),
        "steps": list(
            Step.objects.filter(task_id=task_id).order_by("seq").values_list("seq", "name", "epoch", "output")
        ),
        "effects": list(Effect.objects.filter(task_id=task_id).values_list("id", "state", "epoch", "sends", "receipt")),
        "children": list(Task.objects.filter(parent_id=task_id).values_list("id", "status", "epoch", "output")),
        "attempts": list(
            Attempt.objects.filter(task_id=task_id)
            .order_by("epoch")
            .values_list("epoch", "worker", "ended_at", "end_reason")
        ),
    }


@pytest.mark.parametrize("point, write, frozen_seq", CASES)
def test_a_thawed_worker_past_its_lease_has_every_write_refused(live, fleet, fake, tmp_path, point, write, frozen_seq):
    fleet.supervisors(2)
    (frozen,) = fleet.workers(1, env=armed(tmp_path, point))
    task_id = submit("t.all_writes", {"url": fake.url}).task_id

    marker, held = wait_marker(tmp_path, task_id, point)
    assert (held["pid"], held["epoch"]) == (frozen.pid, 1)
    os.kill(frozen.pid, signal.SIGSTOP)  # the worker and its heartbeat thread stop together

    # The lease expires; a supervisor starts attempt 2 and an unarmed worker finishes it.
    (replacement,) = fleet.workers(1)
    task = wait_until(
        lambda: Task.objects.filter(id=task_id, status=states.COMPLETED, epoch=2).first(),
        timeout=30,
        message="the replacement to complete the task at epoch 2",
    )
    (child,) = Task.objects.filter(parent_id=task_id)
    wait_until(
        lambda: Task.objects.filter(id=child.id, status=states.COMPLETED).exists(), message="the child to complete"
    )
    wait_nothing_held()
    assert attempts_of(task_id) == [(1, states.FIRST, "lease_expired"), (2, states.RECOVERY, "complete")]
    before, last_event = _written(task_id), AuditEvent.objects.latest("id").id

    release(marker)
    os.kill(frozen.pid, signal.SIGCONT)
    refused = wait_until(
        lambda: AuditEvent.objects.filter(task_id=task_id, kind="write.refused", data__epoch=1).first(),
        timeout=20,
        message="the thawed worker's refused write",
    )
    frozen.wait_ready(timeout=20)  # it answers a ping only once it has left the attempt

    assert refused.data == {"boundary": "storage", "write": write, "epoch": 1}
    assert refused.actor == f"worker:{worker_name(frozen.pid)}"
    # The refusal is the only trace the thawed worker left, on any task.
    assert list(AuditEvent.objects.filter(id__gt=last_event).values_list("task_id", "kind")) == [
        (task.id, "write.refused")
    ]
    assert _written(task_id) == before

    # Nothing by epoch 1 at or after the point it froze at; the replacement wrote the rest.
    assert list(Step.objects.filter(task_id=task_id).order_by("seq").values_list("seq", "epoch")) == [
        (seq, 1 if seq < frozen_seq else 2) for seq in range(STEPS)
    ]
    task.refresh_from_db()
    completed = AuditEvent.objects.get(task_id=task_id, kind="task.completed")
    assert (task.status, task.epoch, completed.actor) == (states.COMPLETED, 2, f"worker:{worker_name(replacement.pid)}")
    (effect,) = Effect.objects.filter(task_id=task_id)
    assert task.output == {"child": str(child.id), "receipt": effect.receipt}
    # Exactly one child and one operation at the service, whoever made them.
    assert Task.objects.filter(parent_id=task_id).count() == 1 and Task.objects.count() == 2
    assert fake.performed_by_key() == {effect.key: 1} and len(fake.calls()) == 1
    assert int(fake.calls()[0]["worker"]) == (frozen.pid if frozen_seq > 2 else replacement.pid)
    first = Attempt.objects.get(task_id=task_id, epoch=1)
    assert (first.worker, first.end_reason) == (worker_name(frozen.pid), "lease_expired")
    assert held_slots() == [] and admitted_in("default") == 0
