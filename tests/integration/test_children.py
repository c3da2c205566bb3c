"""Children: ctx.spawn() makes tasks in their own right (lineage recorded, addressable,
cancellable) and ctx.wait() waits for them durably, holding no worker and no slot.

The wake-up race: a parent waits for two children that finish at the same moment. Each
child, on reaching a terminal status, locks the parent row and wakes it if no other
awaited child is still live (runtime/attempts/transitions.py). Without that lock both children
could see the other as still running and neither would wake the parent. The race runs
without a supervisor, because the supervisor's sweep also wakes waiting parents and
would hide a lost wake-up.
"""

from collections import Counter

import pytest

from runtime import states
from runtime.limits.services import pool_create
from runtime.models import Attempt, AuditEvent, Slot, Step, StopAck, Task
from runtime.stops.services import task_stop
from runtime.tasks.selectors import task_detail
from runtime.tasks.services import task_submit
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture
def fleet(shared_fleet):
    """Warm workers, lent to each test in turn (tests/harness.py WarmFleet)."""
    return shared_fleet


ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
RACE_TRIALS = 30


def status_of(task_id) -> str:
    return Task.objects.values_list("status", flat=True).get(id=task_id)


def reached(task_id, status: str, *, timeout: float = 20.0) -> Task:
    return wait_until(
        lambda: Task.objects.filter(id=task_id, status=status).first(),
        timeout=timeout,
        message=f"task {task_id} to be {status}",
    )


def children_of(task_id) -> list[Task]:
    return list(Task.objects.filter(parent_id=task_id).order_by("spawn_seq"))


def busy(url: str) -> dict:
    return {"agent": "t.busy", "input": {"url": url, "delay": 0}}


def test_spawned_children_record_their_lineage_and_are_tasks_in_their_own_right(live, fleet):
    fleet.workers(2)
    root = task_submit(
        agent="t.spawner",
        **ALICE,
        input={
            "children": [
                {"agent": "t.child", "input": {"value": 1}},
                {"agent": "t.parent", "input": {"values": [10, 20]}},
            ]
        },
    ).task_id

    done = reached(root, states.COMPLETED)

    kid, middle = children_of(root)
    grandchildren = children_of(middle.id)
    assert [g.input for g in grandchildren] == [{"value": 10, "fail": False}, {"value": 20, "fail": False}]
    # Lineage: parent is the spawner one level up; root is the task that started it all.
    assert (kid.parent_id, kid.root_id, kid.spawn_seq) == (root, root, 0)
    assert (middle.parent_id, middle.root_id, middle.spawn_seq) == (root, root, 1)
    assert {(g.parent_id, g.root_id) for g in grandchildren} == {(middle.id, root)}
    assert Task.objects.get(id=root).root_id == root and Task.objects.get(id=root).parent_id is None
    # Same tenant and owner as the parent, which is recorded as the one that submitted them.
    for task in (kid, middle, *grandchildren):
        assert (task.tenant, task.owner, task.status) == ("acme", "user:alice", states.COMPLETED)
        submitted = AuditEvent.objects.get(task_id=task.id, kind="task.submitted")
        assert submitted.actor == f"task:{task.parent_id}"
    # Addressable on their own: detail, attempts and audit chain per child.
    detail = task_detail(middle.id)
    assert [c.id for c in detail.children] == [g.id for g in grandchildren]
    # (one attempt if its children had finished before it called wait, else two)
    assert detail.attempts[-1].end_reason == "complete"
    assert [a.kind for a in detail.audit][0] == "task.submitted"
    assert detail.audit[-1].kind == "task.completed"
    # The parent got each child's result, in the order it asked.
    assert [(r["task_id"], r["status"], r["output"]) for r in done.output["results"]] == [
        (str(kid.id), states.COMPLETED, {"value": 2}),
        (
            str(middle.id),
            states.COMPLETED,
            {"results": [[states.COMPLETED, {"value": 20}], [states.COMPLETED, {"value": 40}]]},
        ),
    ]


def test_a_waiting_parent_holds_no_slot_so_its_children_can_run_in_a_one_slot_pool(live, fleet, fake):
    # Parent and children share the default pool. With one slot, the children can only
    # ever run if the waiting parent gave its slot back.
    pool_create(actor="user:alice", name="default", max_running=1, max_queued=10)
    fleet.workers(2)
    fake.push("hang")
    parent = task_submit(agent="t.spawner", input={"children": [busy(fake.url), busy(fake.url)]}, **ALICE).task_id

    assert fake.wait_for_hung(1, timeout=20)  # the first child is running, in the only slot
    first, second = children_of(parent)
    assert status_of(parent) == states.WAITING
    assert (status_of(first.id), status_of(second.id)) == (states.RUNNING, states.QUEUED)
    assert list(Slot.objects.filter(task__isnull=False).values_list("task_id", flat=True)) == [first.id]
    assert [(a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=parent)] == [("first", "wait")]
    assert not Attempt.objects.filter(task_id=parent, ended_at__isnull=True).exists()

    fake.release()
    done = reached(parent, states.COMPLETED)
    assert [r["status"] for r in done.output["results"]] == [states.COMPLETED, states.COMPLETED]
    assert [(a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=parent).order_by("epoch")] == [
        ("first", "wait"),
        ("resume", "complete"),
    ]
    assert not Slot.objects.filter(task__isnull=False).exists()


def test_a_failed_childs_outcome_is_returned_to_its_parent(live, fleet):
    fleet.workers(2)
    parent = task_submit(
        agent="t.spawner",
        **ALICE,
        input={
            "children": [
                {"agent": "t.child", "input": {"value": 1}},
                {"agent": "t.child", "input": {"value": 2, "fail": True}},
            ]
        },
    ).task_id

    done = reached(parent, states.COMPLETED)  # a failed child does not fail its parent

    ok, failed = done.output["results"]
    assert (ok["status"], ok["output"], ok["error"]) == (states.COMPLETED, {"value": 2}, None)
    assert (failed["status"], failed["output"]) == (states.FAILED, None)
    assert failed["error"]["code"] == "AGENT_ERROR"
    assert failed["error"]["type"] == "RuntimeError"
    assert failed["error"]["message"] == "child asked to fail"
    assert status_of(failed["task_id"]) == states.FAILED


def test_cancelling_a_parent_cancels_its_live_children_and_nothing_overwrites_it(live, fleet, fake):
    fleet.workers(3)
    fake.push("hang", "hang")
    parent = task_submit(
        agent="t.spawner",
        **ALICE,
        input={
            "children": [
                {"agent": "t.child", "input": {"value": 1}},
                busy(fake.url),
                busy(fake.url),
            ]
        },
    ).task_id
    assert fake.wait_for_hung(2, timeout=20)  # both busy children are running, hung
    finished, *running = children_of(parent)
    reached(finished.id, states.COMPLETED)
    reached(parent, states.WAITING)

    started = task_stop(task_id=parent, actor="user:alice", reason="stop the batch")

    assert set(started.tasks) == {parent, *(c.id for c in running)}
    assert status_of(finished.id) == states.COMPLETED  # already finished: it stays finished
    # The running children's workers had not answered when the stop committed, and the
    # parent waits for its children (leaf first): nothing was cancelled in the stop's
    # transaction. (The workers' stop watchers answer within milliseconds after it.)
    assert started.cancelled == []
    assert {status_of(c.id) for c in running} <= {states.STOPPING, states.CANCELLED}
    for task_id in started.tasks:
        event = AuditEvent.objects.get(task_id=task_id, kind="task.stopping")
        assert (event.actor, event.data["requested_on"]) == ("user:alice", str(parent))

    # The running children's workers interrupt their hung calls (runtime/worker/
    # stop_watch.py) without the service answering, each acknowledges, and the tree is
    # cancelled leaves first. (Released only afterwards: an answer arriving first would
    # end an attempt at its next write instead, `fenced`.)
    wait_until(
        lambda: not Attempt.objects.filter(ended_at__isnull=True).exists(),
        message="the stopped children's workers to acknowledge",
    )
    fake.release()
    wait_until(lambda: status_of(parent) == states.CANCELLED, message="the parent to be cancelled")
    assert [status_of(t) for t in (parent, *(c.id for c in running))] == [states.CANCELLED] * 3
    cancelled_at = {
        e.task_id: e.id for e in AuditEvent.objects.filter(task_id__in=started.tasks, kind="task.cancelled")
    }
    assert all(cancelled_at[c.id] < cancelled_at[parent] for c in running)  # leaf first
    assert all(
        e.data["acknowledged"] for e in AuditEvent.objects.filter(task_id__in=started.tasks, kind="task.cancelled")
    )
    assert {a.end_reason for c in running for a in Attempt.objects.filter(task_id=c.id)} == {"stopped"}
    assert {
        a.detail["at"] for a in StopAck.objects.filter(task_id__in=[c.id for c in running], boundary=states.WORKER)
    } == {"in agent code"}
    assert not Step.objects.filter(task_id__in=[c.id for c in running]).exists()
    assert not Slot.objects.filter(task__isnull=False).exists()
    assert Attempt.objects.filter(task_id=parent).count() == 1  # never woken, never resumed


def test_two_children_finishing_at_the_same_moment_always_wake_their_parent(live, fleet, fake):
    """No supervisor runs: only the children themselves can wake the parent."""
    fleet.workers(3)
    outcomes = Counter()
    for trial in range(RACE_TRIALS):
        fake.push("hang", "hang")
        parent = task_submit(agent="t.spawner", input={"children": [busy(fake.url), busy(fake.url)]}, **ALICE).task_id
        # Both children are in flight and the parent is waiting for them; then both
        # answers are released at once, so both children end their attempts together.
        assert fake.wait_for_hung(2, timeout=20)
        reached(parent, states.WAITING)
        assert fake.release() == 2

        kids = [c.id for c in children_of(parent)]
        wait_until(
            lambda: Task.objects.filter(id__in=kids, status=states.COMPLETED).count() == 2,
            message=f"trial {trial}'s children to complete",
        )
        try:
            reached(parent, states.COMPLETED, timeout=10)
            outcomes["parent woken"] += 1
        except AssertionError:
            outcomes[f"lost wake-up ({status_of(parent)})"] += 1
            task_stop(task_id=parent, actor="test", reason="lost wake-up")  # next trial starts clean
        wakes = AuditEvent.objects.filter(task_id=parent, kind="task.woken")
        assert all(w.data["by"] == "children" for w in wakes)
        outcomes[f"woken {wakes.count()} time(s)"] += 1

    print(f"\nsibling wake-up race over {RACE_TRIALS} trials: {dict(outcomes)}")
    assert outcomes == Counter({"parent woken": RACE_TRIALS, "woken 1 time(s)": RACE_TRIALS})
