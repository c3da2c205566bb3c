"""Fleet-wide concurrency limits (docs/contracts.md §1): a pool's running limit holds across
worker processes, its waiting queue is bounded and rejects with QUEUE_FULL, and a slot
comes back on completion, failure, cancellation and worker death.

Concurrency is measured from two independent sides while the tasks run: the fake
service counts the requests in flight at once (what the outside world sees), and a
sampler thread reads the held Slot rows, running tasks and live attempts from
PostgreSQL in one snapshot per sample (what the runtime believes).
"""

from __future__ import annotations

from collections import Counter

import pytest

from runtime import states
from runtime.errors import QueueFull
from runtime.limits.services import pool_create
from runtime.models import Attempt, AuditEvent, Slot, Step, StopAck, Task
from runtime.stops.services import task_stop
from runtime.tasks.services import Submission, task_submit
from tests.concurrency import Sampler, usage
from tests.harness import race, wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture
def fleet(shared_fleet):
    """Warm workers, lent to each test in turn (tests/harness.py WarmFleet)."""
    return shared_fleet


ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
QUEUE_FULL_TRIALS = 10


def submit(agent: str, input: dict, pool: str):
    return task_submit(agent=agent, input=input, pool=pool, **ALICE)


def held_slots(pool: str) -> int:
    return Slot.objects.filter(pool=pool, task__isnull=False).count()


def statuses(ids) -> Counter:
    return Counter(Task.objects.filter(id__in=ids).values_list("status", flat=True))


def all_status(ids, status: str) -> bool:
    return statuses(ids) == Counter({status: len(ids)})


def test_a_pool_never_runs_more_than_its_limit_across_worker_processes(live, fleet, fake):
    pool_create(actor="user:alice", name="limited", max_running=2, max_queued=100)
    fleet.workers(3)

    with Sampler("limited", fake, pressure=True) as sampler:
        ids = [submit("t.busy", {"url": fake.url, "delay": 0.05}, "limited").task_id for _ in range(30)]
        wait_until(lambda: all_status(ids, states.COMPLETED), timeout=60, message="all 30 tasks to complete")

    assert len(sampler.samples) > 50, "the sampler must have watched the run"
    # The outside world never saw more than two requests at once, and did see two.
    assert fake.peak_active == 2
    assert len(fake.calls()) == 30
    # Two requests at once came from two worker processes (each runs one attempt at a
    # time). The third kept claiming too (pressure), but a worker that frees a slot
    # claims the next task itself at once, so the third may never win one.
    assert len({c["worker"] for c in fake.calls()}) >= 2
    # PostgreSQL's view: held slots, running tasks and live attempts never exceeded two.
    assert sampler.peak(0) == 2
    assert sampler.peak(1) <= 2
    assert sampler.peak(2) <= 2
    assert sampler.peak(3) <= 2
    assert held_slots("limited") == 0


def test_a_full_pool_runs_one_queues_one_and_rejects_the_rest_with_queue_full(live, fleet, fake):
    """max_running 1 + max_queued 1, five submits released together: 1 runs, 1 waits,
    3 are refused with QUEUE_FULL, and a refused submit leaves nothing behind."""
    fleet.workers(1)
    outcomes = Counter()
    admitted_ids = []
    for trial in range(QUEUE_FULL_TRIALS):
        pool = f"tight-{trial}"
        pool_create(actor="user:alice", name=pool, max_running=1, max_queued=1)
        fake.push("hang")  # the first task's call hangs, so it stays running meanwhile

        untasked = AuditEvent.objects.filter(task_id__isnull=True).count()
        results = race(5, lambda i: submit("t.busy", {"url": fake.url, "delay": 0}, pool))
        assert AuditEvent.objects.filter(task_id__isnull=True).count() == untasked

        admitted = [r for r in results if isinstance(r, Submission)]
        refused = [r for r in results if isinstance(r, QueueFull)]
        outcomes.update(
            admitted=len(admitted), queue_full=len(refused), other=len(results) - len(admitted) - len(refused)
        )
        assert len(admitted) == 2 and len(refused) == 3, results
        assert all(r.created and r.status == states.QUEUED for r in admitted)
        for refusal in refused:
            assert refusal.code == "QUEUE_FULL"
            assert refusal.details == {"pool": pool, "admitted": 2, "max_running": 1, "max_queued": 1}
        ids = [r.task_id for r in admitted]
        admitted_ids += ids

        # Observably: one holds the slot (hung in the service), the other waits for it.
        assert fake.wait_for_hung(1, timeout=20)
        wait_until(
            lambda: statuses(ids) == Counter({states.RUNNING: 1, states.QUEUED: 1}),
            message="one running and one queued",
        )
        running = Task.objects.get(id__in=ids, status=states.RUNNING)
        assert list(Slot.objects.filter(pool=pool, task__isnull=False).values_list("task_id", flat=True)) == [
            running.id
        ]

        fake.release()
        wait_until(lambda: all_status(ids, states.COMPLETED), message=f"trial {trial}'s tasks to complete")
        assert held_slots(pool) == 0

    assert outcomes == Counter(admitted=2 * QUEUE_FULL_TRIALS, queue_full=3 * QUEUE_FULL_TRIALS, other=0)
    # Nothing half-created: only the admitted tasks exist, and every task's audit row is
    # theirs (a refused submit wrote no row about no task either: checked per trial).
    assert Task.objects.count() == len(admitted_ids)
    assert AuditEvent.objects.filter(kind="task.submitted").count() == len(admitted_ids)
    assert not AuditEvent.objects.filter(task_id__isnull=False).exclude(task_id__in=admitted_ids).exists()


def test_slots_come_back_on_completion_and_failure(live, fleet, fake):
    """In a one-slot pool every task runs only if each finished one gave its slot back."""
    pool_create(actor="user:alice", name="one", max_running=1, max_queued=20)
    fleet.workers(2)
    plan = [
        ("t.child", {"value": 1, "fail": True}),
        ("t.busy", {"url": fake.url, "delay": 0.02}),
        ("t.child", {"value": 2}),
        ("t.child", {"value": 3, "fail": True}),
        ("t.busy", {"url": fake.url, "delay": 0.02}),
        ("t.child", {"value": 4}),
    ]
    ids = [submit(agent, input, "one").task_id for agent, input in plan]

    wait_until(lambda: not statuses(ids).keys() - states.TERMINAL, message="every task to finish")

    assert [Task.objects.get(id=i).status for i in ids] == [
        states.FAILED,
        states.COMPLETED,
        states.COMPLETED,
        states.FAILED,
        states.COMPLETED,
        states.COMPLETED,
    ]
    assert held_slots("one") == 0
    assert not Attempt.objects.filter(ended_at__isnull=True).exists()
    assert sorted(Attempt.objects.values_list("end_reason", flat=True)) == sorted(
        ["fail", "complete", "complete", "fail", "complete", "complete"]
    )


def test_a_stopped_task_keeps_its_slot_until_its_worker_notices_then_frees_it(live, fleet, fake):
    pool_create(actor="user:alice", name="one", max_running=1, max_queued=5)
    fleet.workers(1)
    fake.push("hang")
    doomed = submit("t.busy", {"url": fake.url}, "one").task_id
    assert fake.wait_for_hung(1, timeout=20)
    behind = submit("t.busy", {"url": fake.url}, "one").task_id

    assert task_stop(task_id=doomed, actor="user:alice", reason="test").tasks == [doomed]

    # The worker notices at once (its stop watcher interrupts the call it is in) and
    # frees the slot as it acknowledges; only then can the queued task start.
    wait_until(
        lambda: Task.objects.filter(id=behind, status=states.COMPLETED).exists(),
        message="the queued task to get the freed slot and complete",
    )
    fake.release()

    assert Task.objects.get(id=doomed).status == states.CANCELLED
    assert not Step.objects.filter(task_id=doomed).exists()
    assert [(a.epoch, a.end_reason) for a in Attempt.objects.filter(task_id=doomed)] == [(1, "stopped")]
    (ack,) = StopAck.objects.filter(task_id=doomed, boundary=states.WORKER)
    assert ack.detail["ended"] == "cleanly"
    freed = AuditEvent.objects.get(task_id=doomed, kind="attempt.stopped")
    assert freed.data["slot_freed"] is True
    # The queued task was claimed only after the stopped attempt let its slot go.
    assert Attempt.objects.get(task_id=behind).started_at >= ack.at
    assert held_slots("one") == 0


def worker_in_call(workers, fake):
    """The worker process whose request the fake service is holding."""
    (hung,) = [c for c in fake.calls() if c["outcome"] == "performed" and not c["answered"]]
    (worker,) = [w for w in workers if str(w.pid) == hung["worker"]]
    return worker


def test_a_stopped_task_whose_worker_died_gets_its_slot_back_from_the_supervisor(live, fleet, fake):
    pool_create(actor="user:alice", name="one", max_running=1, max_queued=5)
    workers = fleet.workers(2)  # the second one is idle until the slot comes back
    fleet.supervisors(1)
    fake.push("hang")
    doomed = submit("t.busy", {"url": fake.url}, "one").task_id
    assert fake.wait_for_hung(1, timeout=20)
    worker_in_call(workers, fake).kill()  # it will never acknowledge the stop
    task_stop(task_id=doomed, actor="user:alice", reason="test")
    after = submit("t.busy", {"url": fake.url}, "one").task_id

    # One slot: the next task can run only once the supervisor released the abandoned one.
    wait_until(
        lambda: Task.objects.filter(id=after, status=states.COMPLETED).exists(),
        message="the supervisor to release the abandoned attempt and the next task to run",
    )
    assert [(a.epoch, a.end_reason) for a in Attempt.objects.filter(task_id=doomed)] == [(1, "abandoned")]
    assert Task.objects.get(id=doomed).status == states.CANCELLED
    assert held_slots("one") == 0
    fake.release()


def test_a_dead_workers_slot_comes_back_when_the_supervisor_recovers_its_lease(live, fleet, fake):
    pool_create(actor="user:alice", name="one", max_running=1, max_queued=5)
    workers = fleet.workers(2)
    fleet.supervisors(1)
    fake.push("hang")
    victim = submit("t.busy", {"url": fake.url}, "one").task_id
    assert fake.wait_for_hung(1, timeout=20)
    behind = submit("t.busy", {"url": fake.url}, "one").task_id
    assert list(Slot.objects.filter(pool="one", task__isnull=False).values_list("task_id", flat=True)) == [victim]
    assert Task.objects.get(id=behind).status == states.QUEUED

    worker_in_call(workers, fake).kill()  # SIGKILL mid-task: no heartbeat, no acknowledgment

    # One slot: both can finish only if the dead worker's slot came back.
    wait_until(lambda: all_status([victim, behind], states.COMPLETED), message="both tasks to complete")
    assert [(a.epoch, a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=victim).order_by("epoch")] == [
        (1, "first", "lease_expired"),
        (2, "recovery", "complete"),
    ]
    assert AuditEvent.objects.filter(task_id=victim, kind="task.recovered").count() == 1
    assert held_slots("one") == 0
    fake.release()


def test_sleeping_tasks_hold_no_slot_and_queue_for_slots_when_they_wake(live, fleet, fake):
    pool_create(actor="user:alice", name="naps", max_running=2, max_queued=10)
    fleet.workers(3)
    fleet.supervisors(1)
    ids = [submit("t.nap_then_busy", {"seconds": 2, "url": fake.url, "delay": 0.2}, "naps").task_id for _ in range(6)]

    wait_until(lambda: all_status(ids, states.SLEEPING), message="all six to fall asleep")
    # Six tasks asleep in a two-slot pool: none of them holds a slot, a worker or a lease.
    assert usage("naps") == (0, 0, 0, 6, 0)

    with Sampler("naps", fake, pressure=True) as sampler:
        wait_until(lambda: all_status(ids, states.COMPLETED), timeout=30, message="all six to wake and complete")

    assert fake.peak_active == 2  # they woke together and took turns, two at a time
    assert sampler.peak(0) <= 2 and sampler.peak(1) <= 2 and sampler.peak(2) <= 2
    assert held_slots("naps") == 0
    for task_id in ids:
        assert [(a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=task_id).order_by("epoch")] == [
            ("first", "sleep"),
            ("resume", "complete"),
        ]
