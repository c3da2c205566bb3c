"""docs/contracts.md §1, the pass condition: complete an action, kill the worker before it
saves the result, let two supervisors race to recover. The fake service must see
exactly one committed effect per key, no concurrency slot is lost, the queue bound
holds, and the count of active requests across the old and new workers is recorded.

The service performs the call and then hangs without answering (`hang`), so the old
worker dies holding an action the world has seen but the ledger has only as `intent`.
Keyed: the service deduplicates, so recovery re-sends under the same key and the
ledger commits one operation. Unkeyed: the service would perform again, so recovery
must not re-send; the effect becomes `unknown` and waits for an operator.
"""

from __future__ import annotations

import pytest

from runtime import states
from runtime.effects.services import effect_resolve
from runtime.errors import QueueFull
from runtime.limits.services import pool_create
from runtime.models import Attempt, AuditEvent, Effect, Step, Task
from tests.faults.support import admitted_in, attempts_of, held_slots, sigkill, submit, wait_nothing_held, worker_name
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


def _status(task_id, status: str, timeout: float = 30.0) -> Task:
    return wait_until(
        lambda: Task.objects.filter(id=task_id, status=status).first(),
        timeout=timeout,
        message=f"task {task_id} to be {status}",
    )


def _ledger() -> dict:
    """Everything a late answer to the dead worker could conceivably change."""
    return {
        "tasks": list(Task.objects.order_by("id").values_list("id", "status", "epoch", "output", "updated_at")),
        "effects": list(
            Effect.objects.order_by("id").values_list("id", "state", "epoch", "sends", "receipt", "settled_at")
        ),
        "steps": list(Step.objects.order_by("task", "seq").values_list("task", "seq", "epoch", "output")),
        "audit": AuditEvent.objects.count(),
    }


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
def test_recovery_after_a_kill_mid_call_never_multiplies_the_committed_effect(live, fleet, fake, keyed):
    # One running slot and one queued place: the bound is small enough to hit.
    pool_create(actor="user:alice", name="default", max_running=1, max_queued=1)
    if not keyed:
        fake.set_mode("unkeyed")  # a careless API: it performs every call it receives
    fake.push("hang")  # the first call is performed, then never answered

    # Two live consumers before anything runs: whichever is not killed replaces the other.
    fleet.workers(2)
    task_id = submit("t.effect", {"url": fake.url, "keyed": keyed, "effect_class": "reversible"}).task_id
    assert fake.wait_for_hung(1, timeout=30), "the service never received the call"
    (first_call,) = fake.calls()
    old_pid = int(first_call["worker"])
    assert first_call["outcome"] == "performed"
    (intent,) = Effect.objects.filter(task_id=task_id)
    assert (intent.state, intent.epoch, first_call["key"]) == (states.INTENT, 1, intent.key)

    # The world has the action; the ledger only the intent. Kill the worker that sent it.
    old = sigkill(fleet, old_pid)
    replacement = next(p for p in fleet.processes if p is not old)

    # Recovery is pending (no supervisor runs yet): the dead attempt still holds the one
    # slot and counts as running, so one more task may queue and a third is refused.
    assert Task.objects.get(id=task_id).status == states.RUNNING
    waiting = submit("t.steps", {"n": 1}).task_id
    with pytest.raises(QueueFull) as full:
        submit("t.steps", {"n": 2})
    assert (
        full.value.code,
        full.value.details["admitted"],
        full.value.details["max_running"],
        full.value.details["max_queued"],
    ) == ("QUEUE_FULL", 2, 1, 1)
    assert Task.objects.filter(status=states.QUEUED).count() == 1 and Task.objects.count() == 2

    fleet.supervisors(2)  # they race: exactly one of them recovers the task
    _status(waiting, states.COMPLETED)
    recovered = AuditEvent.objects.filter(task_id=task_id, kind="task.recovered")
    if keyed:
        task = _status(task_id, states.COMPLETED)
        assert attempts_of(task_id) == [(1, states.FIRST, "lease_expired"), (2, states.RECOVERY, "complete")]
        (effect,) = Effect.objects.filter(task_id=task_id)
        assert (effect.state, effect.epoch, effect.sends) == (states.COMMITTED, 2, 2)
        # One operation at the service, answered twice: the hung original and the re-send.
        assert fake.performed_by_key() == {effect.key: 1}
        assert [(c["key"], c["outcome"], int(c["worker"])) for c in fake.calls()] == [
            (effect.key, "performed", old_pid),
            (effect.key, "deduplicated", replacement.pid),
        ]
        assert task.output == {"receipt": effect.receipt}
        assert effect.receipt == {"op_id": first_call["op_id"], "key": effect.key, "deduplicated": True}
    else:
        _status(task_id, states.BLOCKED)
        assert attempts_of(task_id) == [(1, states.FIRST, "lease_expired"), (2, states.RECOVERY, "block")]
        (effect,) = Effect.objects.filter(task_id=task_id)
        assert (effect.state, effect.sends) == (states.UNKNOWN, 1)
        assert len(fake.calls()) == 1, "an unkeyed effect with an unknown outcome was re-sent"

        receipt = {"op_id": first_call["op_id"], "checked_by": "alice", "source": "service console"}
        effect_resolve(effect_id=effect.id, outcome="committed", actor="user:alice", receipt=receipt)
        task = _status(task_id, states.COMPLETED)
        assert task.output == {"receipt": receipt}
        assert attempts_of(task_id)[2:] == [(3, states.RESUME, "complete")]
        effect.refresh_from_db()
        assert (effect.state, effect.resolved_by, effect.sends) == (states.COMMITTED, "user:alice", 1)
        assert len(fake.calls()) == 1
    assert fake.performed_count() == 1
    assert recovered.count() == 1, "two supervisors both recovered the same lease"
    assert recovered.get().data["worker"] == worker_name(old_pid)
    workers = list(Attempt.objects.filter(task_id=task_id).order_by("epoch").values_list("worker", flat=True))
    assert workers[0] == worker_name(old_pid) and set(workers[1:]) == {worker_name(replacement.pid)}
    assert not old.alive()

    # No slot is lost: the dead attempt's slot came back, and nothing is left admitted.
    wait_nothing_held()
    assert held_slots() == []
    assert admitted_in("default") == 0

    peak, calls = fake.peak_active, fake.calls()
    pids = sorted({int(c["worker"]) for c in calls})
    print(
        f"\n[seed {'keyed' if keyed else 'unkeyed'}] peak active requests={peak} calls={len(calls)} "
        f"performed={fake.performed_count()} worker pids={pids} (old={old_pid}, replacement={replacement.pid})"
    )
    # Keyed: the dead worker's request is still open at the service when the re-send
    # arrives, so old and new overlap (2). Unkeyed: nothing is re-sent (1).
    assert peak == (2 if keyed else 1)
    assert pids == sorted({old_pid, replacement.pid} if keyed else {old_pid})

    # Then release the hung request: its answer goes to a dead worker and changes nothing.
    before = _ledger()
    assert fake.release() == 1
    wait_until(lambda: fake.active == 0, message="the released request to finish")
    assert fake.calls()[0]["answered"] is True
    assert fake.performed_count() == 1 and len(fake.calls()) == len(calls)
    assert _ledger() == before
    assert held_slots() == [] and admitted_in("default") == 0
