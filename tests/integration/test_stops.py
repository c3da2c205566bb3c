"""Stops against real processes (docs/contracts.md §3): Celery workers running agents,
supervisors sweeping, a fake outside service whose calls hang until released.

"After the stop commits" is measured on the database's clock: the stop's transaction
began at Stop.requested_at, and it had committed by the clock reading taken right after
task_stop() returned (`committed_by`). A write later than that was admitted after the
stop; one between the two is counted apart, as started before the commit. Effects that
began before the stop (steward_effect.created_at < requested_at) are reported apart.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter

import pytest
from django.db import connection

from runtime import states
from runtime.models import Attempt, AuditEvent, Effect, Process, Step, Stop, StopAck, Task
from runtime.stops.services import task_stop
from runtime.tasks.services import task_resume, task_submit
from tests.harness import Fleet, wait_until

pytestmark = [pytest.mark.integration]

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
FOUR = sorted(states.STOP_BOUNDARIES)
RESTART_TRIALS = [pytest.param(20, id="20-trials"), pytest.param(200, id="200-trials", marks=pytest.mark.stress)]
TREE_TRIALS = [pytest.param(1, id="1-tree"), pytest.param(10, id="10-trees", marks=pytest.mark.stress)]


@pytest.fixture(scope="module")
def workers(child_env, django_db_blocker):
    """Four workers for the whole module: starting them is most of a test's time. Each
    writes its credential's row (tests/harness.py), before any test has opened the database."""
    started = Fleet(child_env)
    with django_db_blocker.unblock():
        started.workers(4)
    yield started
    started.stop_all()


@pytest.fixture
def quiet(live, workers):
    """`live`, and before its flush the module's workers are idle: no attempt open, no
    other session of the test database inside a transaction (a flush that waited for
    one could outlast its statement timeout on a loaded machine)."""
    workers.credentials_register()  # the last test's flush removed them
    yield
    wait_until(
        lambda: not Attempt.objects.filter(ended_at__isnull=True).exists(), timeout=20, message="every attempt to end"
    )

    def idle():
        with connection.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
            )
            return cur.fetchone()[0] == 0

    wait_until(idle, timeout=10, message="the workers' sessions to be idle")


def db_now():
    with connection.cursor() as cur:
        cur.execute("SELECT clock_timestamp()")
        return cur.fetchone()[0]


def status(task_id) -> str:
    return Task.objects.values_list("status", flat=True).get(id=task_id)


def tree_of(root) -> list:
    ids, frontier = [root], [root]
    while frontier:
        frontier = list(Task.objects.filter(parent_id__in=frontier).values_list("id", flat=True))
        ids += frontier
    return ids


def acks_of(task_id, stop_id) -> list[str]:
    return sorted(StopAck.objects.filter(task_id=task_id, stop_id=stop_id).values_list("boundary", flat=True))


def admitted_after(ids, moment) -> Counter:
    """Writes of these tasks that landed after `moment` (the database's clock)."""
    return Counter(
        {
            "steps": Step.objects.filter(task_id__in=ids, finished_at__gt=moment).count(),
            "attempts": Attempt.objects.filter(task_id__in=ids, started_at__gt=moment).count(),
            "effects": Effect.objects.filter(task_id__in=ids, created_at__gt=moment).count(),
            "receipts": Effect.objects.filter(task_id__in=ids, settled_at__gt=moment).count(),
            "children": Task.objects.filter(parent_id__in=ids, created_at__gt=moment).count(),
        }
    )


def sweeping(supervisor):
    """Wait until `supervisor` (a process we started) has swept and beaten."""
    wait_until(
        lambda: Process.objects.filter(kind="supervisor", pid=supervisor.pid, last_sweep_at__isnull=False).exists(),
        timeout=30,
        message=f"supervisor {supervisor.pid} to sweep",
    )
    return supervisor


def sweeps_after(moment, *, timeout: float = 20.0) -> None:
    """Wait until a supervisor has run a whole sweep that began after `moment`: it beats
    (last_sweep_at) after a sweep, so the sweep before a beat later than the first beat
    past `moment` began after that first beat."""

    def beat_after(when):
        return (
            Process.objects.filter(kind="supervisor", last_sweep_at__gt=when)
            .order_by("-last_sweep_at")
            .values_list("last_sweep_at", flat=True)
            .first()
        )

    first = wait_until(lambda: beat_after(moment), timeout=timeout, message="a supervisor's sweep")
    wait_until(lambda: beat_after(first), timeout=timeout, message="a supervisor's next sweep")


def test_a_stop_during_a_durable_sleep_cancels_at_once_and_the_timer_runs_nothing(quiet, workers, fleet):
    fleet.supervisors(1)
    sleeper = task_submit(agent="t.sleeper", input={"seconds": 1.0}, **ALICE).task_id
    asleep = wait_until(
        lambda: Task.objects.filter(id=sleeper, status=states.SLEEPING).first(), message="the sleeper to fall asleep"
    )

    started = task_stop(task_id=sleeper, actor="user:alice", reason="stop the sleeper")

    # Cancelled in the stop's own transaction: nothing of it was running anywhere.
    assert (started.tasks, started.cancelled, started.stopping) == ([sleeper], [sleeper], [])
    stop = Stop.objects.get(id=started.stop_id)
    assert status(sleeper) == states.CANCELLED
    assert (stop.finished_at is not None, stop.outcome) == (True, "acknowledged")
    assert acks_of(sleeper, stop.id) == FOUR
    assert StopAck.objects.get(task_id=sleeper, boundary=states.SCHEDULER).detail["timer_cancelled"]
    cancelled = AuditEvent.objects.get(task_id=sleeper, kind="task.cancelled")
    assert (cancelled.data["acknowledged"], cancelled.data["missing"]) == (True, [])
    assert Task.objects.get(id=sleeper).wake_at is None

    # The time it would have woken passes, and a supervisor sweeps after it: nothing runs.
    sweeps_after(asleep.wake_at)
    assert status(sleeper) == states.CANCELLED
    assert [(a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=sleeper)] == [("first", "sleep")]
    assert list(Step.objects.filter(task_id=sleeper).values_list("name", flat=True)) == ["before", "sleep"]
    assert (
        not AuditEvent.objects.filter(task_id=sleeper, kind__in=["task.woken", "attempt.started"])
        .exclude(data__epoch=1)
        .exists()
    )


SPAWN_TRIALS = RESTART_TRIALS


@pytest.mark.parametrize("trials", SPAWN_TRIALS)
def test_a_stop_racing_a_parent_spawning_in_a_worker_covers_every_child_it_admitted(quiet, workers, trials):
    """A parent in a real worker spawns 30 children one after another (each its own
    fenced transaction); the stop lands at a random moment among them."""
    jitter = random.Random(13)
    kids = [{"agent": "t.sleeper", "input": {"seconds": 600}}] * 30
    outcomes = Counter()
    for trial in range(trials):
        parent = task_submit(agent="t.spawner", input={"trial": trial, "children": kids}, **ALICE).task_id
        wait_until(lambda: Task.objects.filter(parent_id=parent).exists(), message="the first child")
        time.sleep(jitter.uniform(0, 0.05))  # aim somewhere among the 30 spawns
        started = task_stop(task_id=parent, actor="user:alice", reason="race the spawns")
        committed_by = db_now()
        wait_until(lambda: status(parent) == states.CANCELLED, message=f"trial {trial}'s parent to be cancelled")
        children = list(Task.objects.filter(parent_id=parent).values("id", "status", "stop_id", "created_at"))
        outcomes["children admitted"] += len(children)
        outcomes["children covered and cancelled"] += sum(
            1 for c in children if c["stop_id"] == started.stop_id and c["status"] == states.CANCELLED
        )
        outcomes["admitted after the commit"] += sum(admitted_after([parent], committed_by).values())
        outcomes["parent acknowledged by all four"] += acks_of(parent, started.stop_id) == FOUR
        outcomes[
            f"parent's worker {AuditEvent.objects.filter(task_id=parent, kind='write.refused').count()} refusal(s)"
        ] += 1
        outcomes["stopped mid-spawn"] += 0 < len(children) < len(kids)

    print(f"\nstop vs a parent spawning in a worker over {trials} trials: {dict(outcomes)}")
    assert outcomes["children covered and cancelled"] == outcomes["children admitted"]
    assert outcomes["admitted after the commit"] == 0
    assert outcomes["parent acknowledged by all four"] == trials


def _tree_input(url: str, middles: int = 7, busy: int = 1, sleepers: int = 5) -> dict:
    leaf_busy = {"agent": "t.busy", "input": {"url": url, "delay": 0}}
    leaf_sleep = {"agent": "t.sleeper", "input": {"seconds": 600}}
    middle = {"agent": "t.spawner", "input": {"children": [leaf_busy] * busy + [leaf_sleep] * sleepers}}
    return {"children": [middle] * middles}


@pytest.mark.parametrize("trials", TREE_TRIALS)
def test_a_fifty_task_tree_stopped_mid_work_ends_cancelled_leaf_first_with_every_acknowledgment(
    quiet, workers, fleet, fake, trials
):
    fleet.supervisors(1)
    outcomes = Counter()
    for _ in range(trials):
        fake.reset()
        fake.push(*["hang"] * 7)
        root = task_submit(agent="t.spawner", input=_tree_input(fake.url), **ALICE).task_id
        # Mid-work: all 50 exist, four busy leaves hold the four workers in a hung call,
        # and what ran before them sleeps; the rest wait (children) or are queued.
        wait_until(lambda: len(tree_of(root)) == 50, message="the tree to grow to 50 tasks")
        assert fake.wait_for_hung(4, timeout=20)
        ids = tree_of(root)
        was = Counter(Task.objects.filter(id__in=ids).values_list("status", flat=True))

        started = task_stop(task_id=root, actor="user:alice", reason="stop the tree", bound_seconds=10)
        committed_by = db_now()
        stop = Stop.objects.get(id=started.stop_id)
        assert sorted(started.tasks) == sorted(ids)
        # The four hung leaves' workers answer when their call returns and their write is refused.
        assert fake.release() == 4
        wait_until(
            lambda: Stop.objects.filter(id=stop.id, finished_at__isnull=False).exists(),
            timeout=30,
            message="the stop to finish",
        )
        stop.refresh_from_db()
        last_ack = max(StopAck.objects.filter(stop_id=stop.id).values_list("at", flat=True))

        statuses = Counter(Task.objects.filter(id__in=ids).values_list("status", flat=True))
        events = {e.task_id: e for e in AuditEvent.objects.filter(task_id__in=ids, kind="task.cancelled")}
        parents = dict(Task.objects.filter(id__in=ids).values_list("id", "parent_id"))
        complete = 0
        for task_id in ids:
            acked = acks_of(task_id, stop.id)
            # Every acknowledgment, or the bound listed the ones that never came.
            complete += acked == FOUR or sorted(set(FOUR) - set(acked)) == events[task_id].data["missing"]
            outcomes["acknowledged by all four"] += acked == FOUR
        outcomes["acknowledgments recorded or listed missing"] += complete
        outcomes["cancelled after a child"] += sum(
            1 for t, p in parents.items() if p in events and t in events and events[t].id > events[p].id
        )
        outcomes["admitted after the commit"] += sum(admitted_after(ids, committed_by).values())
        outcomes["written during the stop's transaction"] += sum(admitted_after(ids, stop.requested_at).values())
        outcomes["effects before the stop"] += Effect.objects.filter(
            task_id__in=ids, created_at__lt=stop.requested_at
        ).count()
        outcomes["workers that acknowledged"] += StopAck.objects.filter(
            stop_id=stop.id, boundary=states.WORKER, detail__ended="cleanly"
        ).count()
        outcomes["cancelled"] += statuses[states.CANCELLED]
        outcomes["tasks"] += len(ids)
        outcomes[f"stop outcome {stop.outcome}"] += 1
        for name, n in was.items():
            outcomes[f"was {name}"] += n
        print(
            f"\n50-task tree: request to last acknowledgment "
            f"{(last_ack - stop.requested_at).total_seconds() * 1000:.0f} ms"
        )

    print(f"\n50-task tree stopped mid-work, {trials} tree(s): {dict(outcomes)}")
    assert outcomes["tasks"] == outcomes["cancelled"] == 50 * trials
    assert outcomes["acknowledgments recorded or listed missing"] == 50 * trials
    assert outcomes["acknowledged by all four"] == 50 * trials  # every worker could answer here
    assert outcomes["cancelled after a child"] == 0  # leaf first
    assert outcomes["admitted after the commit"] == 0
    assert outcomes["workers that acknowledged"] == 4 * trials
    assert outcomes["stop outcome acknowledged"] == trials


def test_a_thawed_worker_never_overwrites_cancelled_and_only_a_resume_leaves_it(quiet, workers, fleet, fake):
    sweeping(fleet.supervisors(1)[0])  # so the bound, not the lapsed lease, is what ends the stop
    task_id = task_submit(agent="t.paced", input={"pause": 0.3, "url": fake.url, "steps": 3}, **ALICE).task_id
    wait_until(
        lambda: Step.objects.filter(task_id=task_id, name="before0").exists(), message="the first step to be journaled"
    )
    pid = int(Attempt.objects.get(task_id=task_id).worker.rsplit(":", 1)[1])
    (worker,) = [w for w in workers.processes if w.pid == pid]
    worker.signal(signal.SIGSTOP)  # frozen inside its second step, holding its lease

    started = task_stop(task_id=task_id, actor="user:alice", reason="stop the frozen one", bound_seconds=0.5)
    committed_by = db_now()
    # What it journaled before the freeze (on a loaded machine the signal can land a step
    # later than before0): the thawed worker may add nothing to it.
    journaled = list(Step.objects.filter(task_id=task_id).order_by("seq").values_list("name", flat=True))
    assert started.stopping == [task_id]
    # The bound passes; the sweep cancels it with the worker listed as missing.
    wait_until(lambda: status(task_id) == states.CANCELLED, message="the bound to cancel the task")
    cancelled = AuditEvent.objects.get(task_id=task_id, kind="task.cancelled")
    assert (cancelled.data["acknowledged"], cancelled.data["missing"]) == (False, [states.WORKER])
    assert Stop.objects.get(id=started.stop_id).outcome == "bounded"
    # Its lease lapses; the supervisor ends the attempt and says so (a late acknowledgment, kept).
    ack = wait_until(
        lambda: StopAck.objects.filter(task_id=task_id, boundary=states.WORKER).first(),
        message="the lapsed lease's acknowledgment",
    )
    assert ack.detail["ended"] == "lease lapsed"

    worker.signal(signal.SIGCONT)
    # Thawed, two threads race: the step (its sleep long over) returns and tries to
    # journal, which the fence refuses (write.refused); or the stop watch, reading the
    # notification queued while it was frozen, delivers the stop into the step first, and
    # the attempt leaves writing nothing (the supervisor already ended it). Either way
    # nothing of it lands. A solo worker answers a ping only between tasks: once it does,
    # the thawed attempt is over, whichever way it went (CI once saw the second way).
    worker.wait_ready(timeout=20)
    refused = AuditEvent.objects.filter(task_id=task_id, kind="write.refused")
    assert refused.count() <= 1
    assert all(event.data["epoch"] == 1 for event in refused)
    assert status(task_id) == states.CANCELLED
    assert sum(admitted_after([task_id], committed_by).values()) == 0
    assert journaled[0] == "before0"
    assert list(Step.objects.filter(task_id=task_id).order_by("seq").values_list("name", flat=True)) == journaled

    task_resume(task_id=task_id, actor="user:alice", note="run it to the end")
    assert AuditEvent.objects.get(task_id=task_id, kind="task.resumed").actor == "user:alice"
    wait_until(lambda: status(task_id) == states.COMPLETED, message="the resumed task to complete")
    assert [(a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=task_id).order_by("epoch")] == [
        (states.FIRST, "abandoned"),
        (states.RESUME, "complete"),
    ]


@pytest.mark.parametrize("trials", RESTART_TRIALS)
def test_a_stop_racing_a_supervisor_restart_and_a_due_timer_resurrects_nothing(quiet, workers, fleet, fake, trials):
    """Each trial: a parent waits for a sleeper whose timer comes due now and a paced
    task running in a worker. At the barrier the stop is requested and the supervisor
    is killed (SIGKILL, mid-sweep as likely as not); a spare supervisor carries on and
    another spare is started."""
    jitter = random.Random(11)
    # Four in rotation: each trial kills the oldest and starts a new one, which has
    # three trials' time to boot before it is the oldest; two or more sweep in every trial.
    sups = [sweeping(s) for s in fleet.supervisors(4)]
    outcomes = Counter()
    for trial in range(trials):
        victim = sweeping(sups[0])
        sweeping(sups[1])
        root = task_submit(
            agent="t.spawner",
            **ALICE,
            input={
                "trial": trial,
                "children": [
                    {"agent": "t.sleeper", "input": {"seconds": 0.2}},
                    {"agent": "t.paced", "input": {"pause": 0.05, "url": fake.url, "steps": 5}},
                ],
            },
        ).task_id
        sleeper = wait_until(
            lambda: Task.objects.filter(
                parent_id=root,
                agent="t.sleeper",
                status=states.SLEEPING,
            ).first(),
            message="the sleeper to fall asleep",
        )
        # Aim at the timer: release the barrier within 0.1 s either side of its wake time.
        time.sleep(max(0.0, (sleeper.wake_at - db_now()).total_seconds() + jitter.uniform(-0.1, 0.1)))
        barrier, result = threading.Barrier(2), {}

        def stop_it(root=root, barrier=barrier, result=result):
            try:
                barrier.wait(5)
                result["stop"] = task_stop(task_id=root, actor="user:alice", reason="race the restart")
                result["committed_by"] = db_now()
            except Exception as exc:
                result["error"] = exc
            finally:
                connection.close()

        thread = threading.Thread(target=stop_it)
        thread.start()
        barrier.wait(5)
        time.sleep(jitter.uniform(0, 0.01))
        victim.kill()  # SIGKILL, while it sweeps every 0.1 s: mid-sweep as likely as not
        thread.join(10)
        sups = sups[1:] + fleet.supervisors(1)
        assert "error" not in result, result["error"]  # the paced task outlives the race: there is a live tree
        stop = Stop.objects.get(id=result["stop"].stop_id)
        ids = tree_of(root)
        covered = result["stop"].tasks
        wait_until(
            lambda: Task.objects.filter(id__in=covered, status=states.CANCELLED).count() == len(covered),
            timeout=20,
            message=f"trial {trial}'s stopped tasks to be cancelled",
        )
        # A task the stop did not cover had finished before it: the timer fired, the
        # sleeper woke and completed, and its parent's stop came after.
        finished_first = Task.objects.filter(id__in=ids, status__in=states.TERMINAL).exclude(id__in=covered)
        outcomes["completed before the stop"] += finished_first.filter(finished_at__lte=result["committed_by"]).count()
        outcomes["finished after the stop, uncovered"] += finished_first.filter(
            finished_at__gt=result["committed_by"]
        ).count()
        outcomes["live, uncovered"] += (
            Task.objects.filter(id__in=ids, status__in=states.LIVE).exclude(id__in=covered).count()
        )
        outcomes["resurrected"] += Task.objects.filter(id__in=covered).exclude(status=states.CANCELLED).count()
        outcomes["admitted after the commit"] += sum(admitted_after(ids, result["committed_by"]).values())
        outcomes["timer fired before the stop"] += AuditEvent.objects.filter(
            task_id=sleeper.id, kind="task.woken", at__lt=stop.requested_at
        ).count()
        outcomes["effects before the stop"] += Effect.objects.filter(
            task_id__in=ids, created_at__lt=stop.requested_at
        ).count()
        outcomes["effects in the stop's transaction"] += Effect.objects.filter(
            task_id__in=ids, created_at__gte=stop.requested_at, created_at__lte=result["committed_by"]
        ).count()
        # Begun before the stop, its receipt refused after it: in flight, outcome unknown.
        outcomes["effects before the stop, unsettled"] += Effect.objects.filter(
            task_id__in=ids, created_at__lt=stop.requested_at, settled_at__isnull=True
        ).count()
        stop.refresh_from_db()
        outcomes[f"stop {stop.outcome}"] += 1

    print(f"\nstop vs supervisor restart and a due timer over {trials} trials: {dict(outcomes)}")
    assert outcomes["resurrected"] == outcomes["admitted after the commit"] == 0
    assert outcomes["finished after the stop, uncovered"] == outcomes["live, uncovered"] == 0
    assert outcomes["stop acknowledged"] + outcomes["stop bounded"] == trials
