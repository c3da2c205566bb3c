"""Fan-out breakers under a race: spawns released together by a barrier, each on its own
thread and its own database connection (as workers on separate hosts would be), never
admit one child past a maximum. The count and the insert are serialized by the tree's
lock (runtime/sql/spawn_lock.sql); without it, or with the count in the lock's own
statement (whose snapshot predates the wait), several spawners count the same children
and all insert.

A task's spawns are normally sequential (one attempt, one seq after another); the race
stands for every writer the limit must hold against at once: concurrent spawns of one
attempt's threads, and spawns by the many tasks of one tree for the tree's rate.
"""

from __future__ import annotations

from collections import Counter

import pytest

from runtime import states
from runtime.attempts.journal import JournalCall
from runtime.attempts.lease import claim_next
from runtime.errors import BreakerTripped
from runtime.limits.services import default_pool_name
from runtime.models import Slot, Task
from runtime.states import StepKind
from runtime.tasks import children
from runtime.tasks.services import task_submit
from tests.harness import race

pytestmark = pytest.mark.usefixtures("transactional_db")

TRIALS = [pytest.param(20, id="20-trials"), pytest.param(200, id="200-trials", marks=pytest.mark.stress)]
RACERS = 6
ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}


def out_of_the_way(root) -> None:
    """End the trial's tree, so the next trial claims its own tasks and has slots to."""
    Slot.objects.filter(task__root_id=root).update(task=None, epoch=None, taken_at=None)
    Task.objects.filter(root_id=root).update(status=states.CANCELLED)


def outcome(result) -> str:
    if isinstance(result, BreakerTripped):
        return f"tripped {result.breaker}"
    return "admitted" if not isinstance(result, BaseException) else f"error {type(result).__name__}: {result}"


@pytest.mark.parametrize("trials", TRIALS)
def test_racing_spawns_of_one_task_never_admit_more_than_its_maximum_of_children(trials):
    limits = {"max_children": 3, "max_depth": 10, "max_spawns_per_minute": 1_000_000}
    outcomes = Counter()
    for trial in range(trials):
        root = task_submit(agent="t.fanout", input={"n": 0, "trial": trial}, **ALICE).task_id
        got = claim_next(pool=default_pool_name(), worker="test")
        assert got.lease.task_id == root

        results = race(
            RACERS,
            lambda i, got=got: children.spawn(
                got.lease,
                JournalCall(i, "spawn:t.child", StepKind.SPAWN),
                agent="t.child",
                input={"value": i},
                owner="user:alice",
                root_id=root,
                limits=limits,
            ),
        )
        counted = Counter(outcome(r) for r in results)
        outcomes.update(counted)
        made = Task.objects.filter(parent_id=root).count()
        outcomes[f"{made} children made"] += 1
        assert counted["admitted"] == made  # each admitted spawn made exactly one child
        out_of_the_way(root)

    print(f"\n{RACERS} racing spawns, max_children 3, over {trials} trials: {dict(outcomes)}")
    assert outcomes["3 children made"] == trials, "never more than the maximum, and never fewer"
    assert outcomes["admitted"] == 3 * trials
    assert outcomes["tripped fanout_children"] == (RACERS - 3) * trials


@pytest.mark.parametrize("trials", TRIALS)
def test_racing_spawns_across_one_tree_never_pass_the_trees_rate(trials):
    """Six tasks of one tree (the root and five children, each with its own attempt) spawn
    at once; the tree may take four more spawns this minute, counting the five made."""
    limits = {"max_children": 1_000, "max_depth": 10, "max_spawns_per_minute": 9}
    outcomes = Counter()
    for trial in range(trials):
        root = task_submit(agent="t.fanout", input={"n": 0, "trial": trial}, **ALICE).task_id
        up = claim_next(pool=default_pool_name(), worker="test")
        kids = [
            children.spawn(
                up.lease,
                JournalCall(i, "spawn:t.fanout", StepKind.SPAWN),
                agent="t.fanout",
                input={"n": 0},
                owner="user:alice",
                root_id=root,
                limits=limits,
            )
            for i in range(5)
        ]
        leases = [up.lease] + [claim_next(pool=default_pool_name(), worker="test").lease for _ in kids]
        assert {lease.task_id for lease in leases} == {root, *kids}

        results = race(
            RACERS,
            lambda i, leases=leases: children.spawn(
                leases[i],
                JournalCall(100 + i, "spawn:t.child", StepKind.SPAWN),
                agent="t.child",
                input={"value": i},
                owner="user:alice",
                root_id=root,
                limits=limits,
            ),
        )
        outcomes.update(outcome(r) for r in results)
        made = Task.objects.filter(root_id=root, parent_id__isnull=False).count()
        outcomes[f"{made} spawned in the tree"] += 1
        out_of_the_way(root)

    print(f"\n{RACERS} racing spawns across a tree, max 9 a minute, over {trials} trials: {dict(outcomes)}")
    assert outcomes["9 spawned in the tree"] == trials
    assert outcomes["admitted"] == 4 * trials
    assert outcomes["tripped fanout_rate"] == (RACERS - 4) * trials
