"""A tree's pause under races (runtime/limits/pauses.py), each racer on its own thread
and its own database connection, released together by a barrier, over many trials:

* spawns of the tree racing its pause: each spawn is either admitted before the pause
  commits, and then held by it, or refused (TreePaused); no child is ever left queued;
* a running task ending `pause` racing an operator lifting the pause: the task ends
  queued either way, never blocked by a pause that no longer exists;
* the pause racing a stop of the tree: no deadlock, and the stop covers every task.
"""

from __future__ import annotations

from collections import Counter

import pytest
from django.db.models.functions import Now

from runtime import states
from runtime.attempts.journal import JournalCall
from runtime.attempts.lease import Claim, claim_next
from runtime.errors import BreakerTripped, Fenced, TreePaused
from runtime.limits import pauses
from runtime.limits.services import default_pool_name
from runtime.models import AuditEvent, Slot, Task, TreePause
from runtime.states import StepKind
from runtime.stops.services import task_stop
from runtime.tasks import children
from runtime.tasks.services import task_resume, task_submit
from runtime.worker import executor
from tests.harness import race

pytestmark = pytest.mark.usefixtures("transactional_db")

TRIALS = [pytest.param(20, id="20-trials"), pytest.param(200, id="200-trials", marks=pytest.mark.stress)]
ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
ROOMY = {"max_children": 1_000, "max_depth": 10, "max_spawns_per_minute": 1_000_000}
SPAWNERS = 5


def claim() -> Claim:
    return claim_next(pool=default_pool_name(), worker="test")


def tree(trial: int, kids: int) -> tuple[Claim, list[Claim]]:
    """A running root and `kids` running children of it, each with its own lease."""
    root = task_submit(agent="t.fanout", input={"n": 0, "trial": trial}, **ALICE).task_id
    up = claim()
    assert up.lease.task_id == root
    for i in range(kids):
        children.spawn(
            up.lease,
            JournalCall(i, "spawn:t.child", StepKind.SPAWN),
            agent="t.child",
            input={"value": i},
            owner="user:alice",
            root_id=root,
            limits=ROOMY,
        )
    return up, [claim() for _ in range(kids)]


def trip() -> BreakerTripped:
    return BreakerTripped("a spawn past max_children", breaker=states.FANOUT_CHILDREN, limit=1, observed=2)


def pause(tripper: Claim) -> str:
    """The tripper's spawn was refused: its attempt ends `trip` and pauses the tree, as
    the executor does."""
    executor._trip(tripper, trip())
    return "paused"


def out_of_the_way(root) -> None:
    """End the trial's tree, so the next trial's claims find its own tasks and free slots."""
    Slot.objects.filter(task__root_id=root).update(task=None, epoch=None, taken_at=None)
    Task.objects.filter(root_id=root).update(status=states.CANCELLED, blocked_reason=None, stop=None)
    TreePause.objects.filter(root_id=root, released_at__isnull=True).update(released_by="test", released_at=Now())


def outcome(result) -> str:
    if isinstance(result, TreePaused):
        return "spawn refused: tree paused"
    if isinstance(result, BaseException):
        return f"error {type(result).__name__}: {result}"
    return "paused" if result == "paused" else "spawn admitted"


@pytest.mark.parametrize("trials", TRIALS)
def test_no_spawn_racing_a_pause_escapes_it(trials):
    outcomes = Counter()
    for trial in range(trials):
        up, [tripper] = tree(trial, 1)
        root = up.lease.task_id

        def act(i, up=up, tripper=tripper, root=root):
            if i == SPAWNERS:
                return pause(tripper)
            return children.spawn(
                up.lease,
                JournalCall(10 + i, "spawn:t.child", StepKind.SPAWN),
                agent="t.child",
                input={"value": i},
                owner="user:alice",
                root_id=root,
                limits=ROOMY,
            )

        results = race(SPAWNERS + 1, act)
        counted = Counter(outcome(r) for r in results)
        outcomes.update(counted)
        assert counted["paused"] == 1, results
        made = Task.objects.filter(parent_id=root).exclude(id=tripper.lease.task_id)
        assert made.count() == counted["spawn admitted"]
        # Every child admitted before the pause is held by it: none is left queued.
        assert set(made.values_list("status", "blocked_reason")) <= {(states.BLOCKED, states.TREE_PAUSED)}
        assert TreePause.objects.get(root_id=root).held == counted["spawn admitted"]
        outcomes[f"{counted['spawn admitted']} admitted before the pause"] += 1
        out_of_the_way(root)

    print(f"\n{SPAWNERS} spawns racing a pause of their tree, over {trials} trials: {dict(outcomes)}")
    assert outcomes["paused"] == trials
    assert outcomes["spawn admitted"] + outcomes["spawn refused: tree paused"] == SPAWNERS * trials
    assert not [k for k in outcomes if k.startswith("error")]


@pytest.mark.parametrize("trials", TRIALS)
def test_a_running_task_pausing_as_the_pause_is_lifted_ends_queued_either_way(trials):
    outcomes = Counter()
    for trial in range(trials):
        up, [tripper, running] = tree(trial, 2)
        root = up.lease.task_id
        pause(tripper)
        pause_id = TreePause.objects.get(root_id=root).id
        refusal = pauses.refusal(root, running.lease.task_id)

        def act(i, running=running, refusal=refusal, tripper=tripper):
            if i == 0:
                return executor._paused(running, refusal)
            return task_resume(
                task_id=tripper.lease.task_id, actor="user:alice", note="lift it", limits={"max_children": 5}
            )

        results = race(2, act)
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, errors
        task = Task.objects.get(id=running.lease.task_id)
        assert (task.status, task.blocked_reason) == (states.QUEUED, None), "never blocked by a lifted pause"
        resumed = AuditEvent.objects.filter(task_id=task.id, kind="task.resumed").get()
        outcomes[
            "queued by the release"
            if resumed.data.get("pause_id") == pause_id
            else "queued again as it paused (pause already lifted)"
        ] += 1
        assert TreePause.objects.get(id=pause_id).released_at is not None
        out_of_the_way(root)

    print(f"\na running task pausing as its tree's pause is lifted, over {trials} trials: {dict(outcomes)}")
    assert sum(outcomes.values()) == trials


@pytest.mark.parametrize("trials", TRIALS)
def test_a_pause_racing_a_stop_of_the_tree_never_deadlocks_and_the_stop_covers_every_task(trials):
    outcomes = Counter()
    for trial in range(trials):
        up, [tripper, _other] = tree(trial, 2)  # the other running child: the stop must reach it too
        root = up.lease.task_id

        def act(i, tripper=tripper, root=root):
            if i == 0:
                try:
                    return pause(tripper)
                except Fenced as refused:  # a BaseException: agent code never catches it
                    return refused
            return task_stop(task_id=root, actor="user:alice", reason="racing a pause")

        results = race(2, act)
        paused, stopped = results
        assert not isinstance(stopped, BaseException), stopped
        if isinstance(paused, Fenced):
            outcomes["stop first: the trip was fenced, no pause"] += 1
            assert not TreePause.objects.filter(root_id=root).exists()
        else:
            assert not isinstance(paused, BaseException), paused
            outcomes["pause first, then the stop"] += 1
        statuses = set(Task.objects.filter(root_id=root).values_list("status", flat=True))
        assert statuses <= {states.STOPPING, states.CANCELLED}, statuses
        out_of_the_way(root)

    print(f"\na pause racing a stop of its tree, over {trials} trials: {dict(outcomes)}")
    assert sum(outcomes.values()) == trials
