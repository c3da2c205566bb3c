"""Stops raced at the database (docs/contracts.md §3), with no worker process: the test
plays the worker through the same runtime calls a worker makes (claim, journal write,
spawn, attempt end, the refusal's acknowledgment), so each race is the statements
themselves, released together by a barrier (tests/harness.py race()).

Each race counts its outcomes over TRIALS trials (20 by default, 200 under the
`stress` marker) and prints them; the assertions are on the counts.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest
from django.conf import settings
from django.db import connection

from runtime import db, states
from runtime.attempts import journal
from runtime.attempts.journal import JournalCall
from runtime.attempts.lease import Claim, claim_next
from runtime.attempts.transitions import end_attempt
from runtime.errors import AgentStopped, Fenced, InvalidTransition
from runtime.limits.services import default_pool_name
from runtime.models import Attempt, AuditEvent, Step, Stop, StopAck, Task
from runtime.states import StepKind
from runtime.stops.services import agent_reopen, agent_stop, task_rerun, task_stop
from runtime.tasks import children
from runtime.tasks.services import task_resume, task_submit
from runtime.worker.executor import _refused
from runtime.worker.supervisor import sweep
from tests.harness import race, wait_until

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
TRIALS = [pytest.param(20, id="20-trials"), pytest.param(200, id="200-trials", marks=pytest.mark.stress)]
FOUR = sorted(states.STOP_BOUNDARIES)


JITTER = random.Random(9)  # seeded: a failing run can be repeated


def racing(n: int, fn, *, jitter: float = 0.004) -> list:
    """race(), each racer starting up to `jitter` seconds after the barrier (so every
    order comes up across the trials), and returning Fenced too (a BaseException, so
    that agent code cannot swallow it)."""
    delays = [JITTER.uniform(0, jitter) for _ in range(n)]

    def caught(i):
        time.sleep(delays[i])
        try:
            return fn(i)
        except Fenced as refused:
            return refused

    return race(n, caught)


def submit(agent: str = "t.steps", input: dict | None = None, **kw):
    return task_submit(agent=agent, input=input or {}, **ALICE, **kw).task_id


def claim(task_id) -> Claim:
    """Claim `task_id` as a worker would (it must be the pool's oldest queued task)."""
    got = claim_next(pool=default_pool_name(), worker="test")
    assert got is not None and got.lease.task_id == task_id
    return got


def status(task_id) -> str:
    return Task.objects.values_list("status", flat=True).get(id=task_id)


def acks(task_id, stop_id) -> list[str]:
    return sorted(StopAck.objects.filter(task_id=task_id, stop_id=stop_id).values_list("boundary", flat=True))


def worker_answers(got: Claim) -> str:
    """The worker's next write after the stop: refused, and acknowledged as the executor
    does (runtime/worker/executor.py _refused). Returns what happened to the write."""
    try:
        journal.write(got.lease, seq=99, name="late", kind="step", output="1")
    except Fenced as refused:
        _refused(got, refused)
        return "refused"
    return "accepted"


def db_clock():
    return db.cursor().execute("SELECT clock_timestamp()").fetchone()[0]


def waits_on_lock(pid: int) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted)", [pid])
        return cur.fetchone()[0]


@pytest.mark.parametrize("trials", TRIALS)
def test_a_stop_racing_a_child_spawn_covers_every_child_and_admits_none_after(live, monkeypatch, trials):
    """The parent's attempt spawns while an operator stops it. Half the trials are left to
    the barrier; in the other half the spawn's transaction has inserted the child and
    holds on until the stop's statement waits for the parent's row: then it commits, so
    the stop reads a tree that did not yet hold the child when the statement began."""
    hold = threading.local()
    real_insert = children.insert_task

    def insert_then_hold(**kwargs):
        made = real_insert(**kwargs)
        pids = getattr(hold, "pids", None)
        if pids is not None:  # inserted, not committed: let the stop's statement begin and wait
            pids["spawned"] = True
            wait_until(
                lambda: waits_on_lock(pids["stop"]),
                timeout=10,
                interval=0.002,
                message="the stop to wait for the spawn's lock",
            )
        return made

    monkeypatch.setattr(children, "insert_task", insert_then_hold)
    outcomes = Counter()
    for trial in range(trials):
        parent = submit("t.spawner", {"children": []})
        got = claim(parent)
        forced = trial % 2 == 1
        pids = {}

        def racer(i, got=got, parent=parent, forced=forced, pids=pids):
            if i == 0:
                pids["stop"] = connection.connection.info.backend_pid
                if forced:
                    wait_until(lambda: "spawned" in pids, timeout=10, interval=0.001)
                return task_stop(task_id=parent, actor="user:alice", reason="race a spawn")
            if forced:
                wait_until(lambda: "stop" in pids, timeout=10, interval=0.001)
                hold.pids = pids
            try:
                return children.spawn(
                    got.lease,
                    JournalCall(0, "spawn:t.child", StepKind.SPAWN),
                    agent="t.child",
                    input={"value": 1},
                    owner="user:alice",
                    root_id=parent,
                )
            finally:
                hold.pids = None

        started, spawned = racing(2, racer)
        assert not isinstance(started, BaseException), started
        answered = worker_answers(got)
        kids = list(Task.objects.filter(parent_id=parent).values("id", "status", "stop_id"))
        if isinstance(spawned, (Fenced, children.SpawnRefused)):
            outcome = "spawn refused"
        elif isinstance(spawned, BaseException):
            raise spawned
        else:
            outcome = "child admitted"
        covered = [k for k in kids if k["stop_id"] == started.stop_id and k["status"] == states.CANCELLED]
        outcomes[f"{outcome}{' (forced)' if forced else ''}"] += 1
        outcomes["children not covered by the stop"] += len(kids) - len(covered)
        outcomes["worker write " + answered] += 1
        outcomes[f"parent {status(parent)}"] += 1
        for kid in kids:  # a child the stop missed would run: stop it, so the next trial starts clean
            if kid["status"] in states.LIVE and kid["status"] != states.STOPPING:
                task_stop(task_id=kid["id"], actor="test", reason="missed by the stop")

    print(f"\nstop vs child spawn over {trials} trials: {dict(outcomes)}")
    assert outcomes["children not covered by the stop"] == 0
    assert outcomes["worker write accepted"] == 0
    assert outcomes["parent cancelled"] == trials
    assert outcomes["child admitted (forced)"] == trials // 2  # the forced order admits it first, always
    assert sum(v for k, v in outcomes.items() if k in ("spawn refused", "child admitted")) == trials - trials // 2


@pytest.mark.parametrize("trials", TRIALS)
def test_a_stop_racing_a_completion_write_ends_completed_or_cancelled_never_both(live, trials):
    outcomes = Counter()
    for _ in range(trials):
        task_id = submit()
        got = claim(task_id)

        def racer(i, got=got, task_id=task_id):
            if i == 0:
                return task_stop(task_id=task_id, actor="user:alice", reason="race a completion")
            return end_attempt(got.lease, "complete", output='{"done": true}')

        stopped, completed = racing(2, racer)
        kinds = set(AuditEvent.objects.filter(task_id=task_id).values_list("kind", flat=True))
        if isinstance(stopped, InvalidTransition):
            # The completion committed first: the stop found nothing live and changed nothing.
            assert completed is None, completed
            outcomes["completed first, stop refused"] += 1
            outcomes[f"ended {status(task_id)}"] += 1
            outcomes["stop rows"] += Stop.objects.filter(task_id=task_id).count()
        else:
            assert not isinstance(stopped, BaseException), stopped
            assert isinstance(completed, Fenced), completed
            _refused(got, completed)  # the worker's boundary, as the executor answers
            outcomes["stopped first, completion refused"] += 1
            outcomes[f"ended {status(task_id)}"] += 1
            outcomes["four acknowledgments"] += acks(task_id, stopped.stop_id) == FOUR
        outcomes["completed and cancelled both"] += {"task.completed", "task.cancelled"} <= kinds
        outcomes["completed after a stop"] += "task.completed" in kinds and "task.stopping" in kinds

    print(f"\nstop vs completion over {trials} trials: {dict(outcomes)}")
    first, second = outcomes["completed first, stop refused"], outcomes["stopped first, completion refused"]
    assert first + second == trials
    assert outcomes["ended completed"] == first and outcomes["ended cancelled"] == second
    assert outcomes["four acknowledgments"] == second
    assert outcomes["stop rows"] == 0  # a refused stop leaves no record that claims it stopped anything
    assert outcomes["completed and cancelled both"] == outcomes["completed after a stop"] == 0


@pytest.mark.parametrize("trials", TRIALS)
def test_a_stop_racing_a_reused_key_and_a_rerun_never_resurrects_the_cancelled_task(live, trials):
    outcomes = Counter()
    for trial in range(trials):
        key = f"order-{trial}"
        old = submit(idempotency_key=key)
        got = claim(old)
        journal.write(got.lease, seq=0, name="s0", kind="step", output="0")

        # Round 1: the stop, a re-submission with the same key, and the old attempt's next step.
        def first(i, old=old, key=key, got=got):
            if i == 0:
                return task_stop(task_id=old, actor="user:alice", reason="race a resubmit")
            if i == 1:
                return task_submit(agent="t.steps", input={}, **ALICE, idempotency_key=key)
            return journal.write(got.lease, seq=1, name="s1", kind="step", output="1")

        stopped, again, step = racing(3, first)
        assert not isinstance(stopped, BaseException), stopped
        assert not isinstance(again, BaseException), again
        outcomes[f"resubmit during the stop: same task={again.task_id == old}, created={again.created}"] += 1
        outcomes["old step " + ("refused" if isinstance(step, Fenced) else "landed before the stop")] += 1
        worker_answers(got)
        assert status(old) == states.CANCELLED

        # Round 2: a deliberate rerun, the same key again, and the old attempt writing on.
        def second(i, old=old, key=key, got=got):
            if i == 0:
                return task_rerun(task_id=old, actor="user:alice", reason="run it again")
            if i == 1:
                return task_submit(agent="t.steps", input={}, **ALICE, idempotency_key=key)
            return end_attempt(got.lease, "complete", output='{"late": true}')

        new, later, late = racing(3, second)
        assert not isinstance(new, BaseException), new
        outcomes[f"resubmit after: same task={later.task_id == old}, status={later.status}"] += 1
        outcomes["late completion " + ("refused" if isinstance(late, Fenced) else "accepted")] += 1
        outcomes["rerun is a new id"] += new != old
        outcomes["linked both ways"] += Task.objects.get(id=new).rerun_of_id == old and list(
            Task.objects.get(id=old).reruns.values_list("id", flat=True)
        ) == [new]
        outcomes["old run still cancelled"] += status(old) == states.CANCELLED
        outcomes["old writes in the new task"] += Step.objects.filter(task_id=new).count()
        outcomes["new task has a key"] += Task.objects.get(id=new).idempotency_key is not None
        task_stop(task_id=new, actor="user:alice", reason="next trial")  # keeps the queue empty

    print(f"\nstop vs reused key and rerun over {trials} trials: {dict(outcomes)}")
    assert outcomes["resubmit during the stop: same task=True, created=False"] == trials
    assert outcomes["resubmit after: same task=True, status=cancelled"] == trials
    assert outcomes["late completion refused"] == trials
    assert outcomes["rerun is a new id"] == outcomes["linked both ways"] == trials
    assert outcomes["old run still cancelled"] == trials
    assert outcomes["old writes in the new task"] == outcomes["new task has a key"] == 0


@pytest.mark.parametrize("trials", TRIALS)
def test_a_stop_racing_the_wake_of_a_due_timer_and_a_claim_resurrects_nothing(live, trials):
    """A sleeping task whose wake_at has come: the supervisor's wake sweep, a worker's
    claim (as if the wake-up message arrived) and the stop, released together."""
    outcomes = Counter()
    for _ in range(trials):
        task_id = submit("t.sleeper", {"seconds": 0})
        got = claim(task_id)
        end_attempt(got.lease, "sleep", wake_at=db_clock())  # due at once
        assert status(task_id) == states.SLEEPING

        def racer(i, task_id=task_id):
            if i == 0:
                return task_stop(task_id=task_id, actor="user:alice", reason="race a timer")
            if i == 1:
                return sweep(supervisor_id="test").woken
            return claim_next(pool=default_pool_name(), worker="test-2")

        stopped, woken, claimed = racing(3, racer)
        assert not isinstance(stopped, BaseException), stopped
        after = db_clock()
        outcomes[f"woken={bool(woken)} claimed={claimed is not None}"] += 1
        if claimed is not None:  # its claim committed before the stop: its writes are refused
            outcomes["claimed attempt's write " + worker_answers(claimed)] += 1
        sweep(supervisor_id="test")
        later = claim_next(pool=default_pool_name(), worker="test-3")
        outcomes["claimed after the stop"] += later is not None
        outcomes["attempts started after the stop"] += Attempt.objects.filter(
            task_id=task_id, started_at__gt=after
        ).count()
        outcomes["steps after the stop"] += Step.objects.filter(task_id=task_id, finished_at__gt=after).count()
        outcomes[f"ended {status(task_id)}"] += 1
        outcomes["four acknowledgments"] += acks(task_id, stopped.stop_id) == FOUR

    print(f"\nstop vs timer wake and claim over {trials} trials: {dict(outcomes)}")
    assert outcomes["ended cancelled"] == outcomes["four acknowledgments"] == trials
    assert outcomes["claimed after the stop"] == 0
    assert outcomes["attempts started after the stop"] == outcomes["steps after the stop"] == 0
    assert outcomes["claimed attempt's write accepted"] == 0


@pytest.mark.parametrize("trials", TRIALS)
def test_the_kill_switch_racing_submissions_refuses_or_covers_every_one(live, trials):
    submitters = 6
    outcomes = Counter()
    for trial in range(trials):
        agent_reopen(tenant="acme", agent="t.steps", actor="user:alice", reason="next trial")

        def racer(i, trial=trial):
            if i == 0:
                return agent_stop(tenant="acme", agent="t.steps", actor="user:alice", reason="kill switch")
            return task_submit(agent="t.steps", input={"n": i, "trial": trial}, **ALICE)

        stopped, *subs = racing(1 + submitters, racer)
        assert not isinstance(stopped, BaseException), stopped
        for sub in subs:
            if isinstance(sub, AgentStopped):
                outcomes["refused AGENT_STOPPED"] += 1
                continue
            assert not isinstance(sub, BaseException), sub
            task = Task.objects.get(id=sub.task_id)
            outcomes[
                "created, then covered and cancelled"
                if task.stop_id == stopped.stop_id and task.status == states.CANCELLED
                else f"created, missed ({task.status})"
            ] += 1
        outcomes["live tasks of the agent"] += Task.objects.filter(agent="t.steps", status__in=states.LIVE).count()
        try:
            submit(input={"after": trial})
            outcomes["accepted after the stop"] += 1
        except AgentStopped:
            pass

    agent_reopen(tenant="acme", agent="t.steps", actor="user:alice", reason="done")
    reopened = task_submit(agent="t.steps", input={"reopened": True}, **ALICE)
    print(f"\nkill switch vs {submitters} submitters over {trials} trials: {dict(outcomes)}")
    assert outcomes["refused AGENT_STOPPED"] + outcomes["created, then covered and cancelled"] == trials * submitters
    assert outcomes["live tasks of the agent"] == outcomes["accepted after the stop"] == 0
    assert reopened.created and reopened.status == states.QUEUED


@pytest.mark.parametrize("trials", TRIALS)
def test_the_kill_switch_racing_the_first_submissions_into_a_new_pool_never_deadlocks(live, trials, monkeypatch):
    """As above, with each trial's default pool not there yet: a submitter creates it
    on first use while the kill switch runs, and a pool row that appeared after the
    switch locked every pool row once escaped that lock (a CI run deadlocked on it)."""
    submitters = 4
    outcomes = Counter()
    for trial in range(trials):
        agent_reopen(tenant="acme", agent="t.steps", actor="user:alice", reason="next trial")
        monkeypatch.setitem(
            settings.STEWARD, "DEFAULT_POOL", {"name": f"first-use-{trial}", "max_running": 2, "max_queued": 100}
        )

        def racer(i, trial=trial):
            if i == 0:
                return agent_stop(tenant="acme", agent="t.steps", actor="user:alice", reason="kill switch")
            return task_submit(agent="t.steps", input={"n": i, "trial": trial}, **ALICE)

        stopped, *subs = racing(1 + submitters, racer)
        for result in (stopped, *subs):
            outcomes[type(result).__name__] += 1
            assert not isinstance(result, BaseException) or isinstance(result, AgentStopped), result
        outcomes["live tasks of the agent"] += Task.objects.filter(agent="t.steps", status__in=states.LIVE).count()

    print(f"\nkill switch vs {submitters} first submitters into a new pool over {trials} trials: {dict(outcomes)}")
    assert outcomes["StopStarted"] == trials
    assert outcomes["AgentStopped"] + outcomes["Submission"] == trials * submitters
    assert outcomes["live tasks of the agent"] == 0


def test_terminal_is_final_only_an_audited_resume_leaves_cancelled(live):
    task_id = submit()
    got = claim(task_id)
    stopped = task_stop(task_id=task_id, actor="user:alice", reason="stop it")
    assert status(task_id) == states.STOPPING and acks(task_id, stopped.stop_id) == sorted(
        {states.STORAGE, states.SCHEDULER, states.CREDENTIAL_GATEWAY}
    )
    assert worker_answers(got) == "refused"
    assert status(task_id) == states.CANCELLED and acks(task_id, stopped.stop_id) == FOUR

    late = Counter()
    for name, write in {
        "step": lambda: journal.write(got.lease, seq=0, name="s0", kind="step", output="0"),
        "complete": lambda: end_attempt(got.lease, "complete", output='{"late": true}'),
        "fail": lambda: end_attempt(got.lease, "fail", error={"code": "X"}),
        "sleep": lambda: end_attempt(got.lease, "sleep", wake_at=db_clock()),
        "spawn": lambda: children.spawn(
            got.lease,
            JournalCall(0, "spawn:t.child", StepKind.SPAWN),
            agent="t.child",
            input={"value": 1},
            owner="user:alice",
            root_id=task_id,
        ),
    }.items():
        try:
            write()
            late[f"{name} accepted"] += 1
        except (Fenced, children.SpawnRefused):
            late[f"{name} refused"] += 1
    assert late == Counter({f"{n} refused": 1 for n in ("step", "complete", "fail", "sleep", "spawn")})
    assert status(task_id) == states.CANCELLED
    assert not Step.objects.filter(task_id=task_id).exists()
    assert not Task.objects.filter(parent_id=task_id).exists()
    with pytest.raises(InvalidTransition):
        task_stop(task_id=task_id, actor="user:alice", reason="again")
    assert sweep(supervisor_id="test").woken == 0 and status(task_id) == states.CANCELLED

    task_resume(task_id=task_id, actor="user:alice", note="resume it")
    resumed = AuditEvent.objects.filter(task_id=task_id, kind="task.resumed").get()
    assert resumed.actor == "user:alice"
    again = claim(task_id)
    assert (again.reason, again.lease.epoch) == (states.RESUME, got.lease.epoch + 1)


@pytest.mark.parametrize("trials", TRIALS)
def test_the_kill_switch_racing_a_spawn_of_its_own_agent_covers_the_child_and_never_deadlocks(live, trials):
    """A running task of the agent spawns a child of the same agent (the spawn holds its
    parent's row, then its pool's row, then the switch's lock shared) while another
    caller submits one and the operator closes the switch."""
    outcomes = Counter()
    for trial in range(trials):
        agent_reopen(tenant="acme", agent="t.spawner", actor="user:alice", reason="next trial")
        parent = submit("t.spawner", {"children": [], "trial": trial})
        got = claim(parent)

        def racer(i, got=got, parent=parent, trial=trial):
            if i == 0:
                return agent_stop(tenant="acme", agent="t.spawner", actor="user:alice", reason="kill switch")
            if i == 1:
                return children.spawn(
                    got.lease,
                    JournalCall(0, "spawn:t.spawner", StepKind.SPAWN),
                    agent="t.spawner",
                    input={"children": []},
                    owner="user:alice",
                    root_id=parent,
                )
            return task_submit(agent="t.spawner", input={"children": [], "other": trial}, **ALICE)

        stopped, spawned, submitted = racing(3, racer)
        for name, result in (("stop", stopped), ("spawn", spawned), ("submit", submitted)):
            outcomes[f"{name}: {type(result).__name__}"] += 1
        assert not isinstance(stopped, BaseException), stopped
        worker_answers(got)
        # Made in this trial: ids are time-ordered (runtime/ids.py).
        made = list(Task.objects.filter(agent="t.spawner", id__gt=parent).values("status", "stop_id"))
        outcomes["made and covered"] += sum(
            1 for m in made if m["stop_id"] == stopped.stop_id and m["status"] == states.CANCELLED
        )
        outcomes["made"] += len(made)
        outcomes[f"parent {status(parent)}"] += 1

    print(f"\nkill switch vs a spawn and a submission over {trials} trials: {dict(outcomes)}")
    assert outcomes["stop: StopStarted"] == trials
    assert outcomes["spawn: UUID"] + outcomes["spawn: Fenced"] + outcomes["spawn: SpawnRefused"] == trials
    assert outcomes["submit: Submission"] + outcomes["submit: AgentStopped"] == trials
    assert outcomes["made and covered"] == outcomes["made"]
    assert outcomes["parent cancelled"] == trials


@pytest.mark.parametrize("trials", TRIALS)
def test_the_kill_switch_racing_a_child_finishing_under_another_agents_parent_never_deadlocks(live, trials):
    """The kill switch stops a child whose parent is of another agent: that parent waits
    for it, and the finishing child locks its parent's row before its own."""
    outcomes = Counter()
    for trial in range(trials):
        agent_reopen(tenant="acme", agent="t.steps", actor="user:alice", reason="next trial")
        parent = submit("t.spawner", {"children": [], "trial": trial})
        up = claim(parent)
        kid = children.spawn(
            up.lease,
            JournalCall(0, "spawn:t.steps", StepKind.SPAWN),
            agent="t.steps",
            input={"trial": trial},
            owner="user:alice",
            root_id=parent,
        )
        end_attempt(up.lease, "wait", waiting_on=[kid])  # the parent waits for its child
        got = claim(kid)

        def racer(i, got=got):
            if i == 0:
                return agent_stop(tenant="acme", agent="t.steps", actor="user:alice", reason="kill switch")
            return end_attempt(got.lease, "complete", output='{"done": true}')

        stopped, completed = racing(2, racer)
        for name, result in (("stop", stopped), ("complete", completed)):
            outcomes[f"{name}: {type(result).__name__}"] += 1
        if isinstance(completed, Fenced):
            _refused(got, completed)
        outcomes[f"child {status(kid)}, parent {status(parent)}"] += 1
        task_stop(task_id=parent, actor="test", reason="next trial")

    print(f"\nkill switch vs a child finishing over {trials} trials: {dict(outcomes)}")
    assert outcomes["stop: StopStarted"] == trials
    assert outcomes["complete: NoneType"] + outcomes["complete: Fenced"] == trials
    # The child finished first (and woke its parent) or was stopped (and its parent, outside
    # the stop, was woken by its cancellation): either way the parent is queued again.
    assert outcomes["child completed, parent queued"] + outcomes["child cancelled, parent queued"] == trials


@pytest.mark.parametrize("trials", TRIALS)
def test_two_last_acknowledgments_at_once_still_cancel_their_parent_and_two_stops_make_one(live, trials):
    """Two running children of a waiting parent; two operators stop the parent at once,
    then both children's workers answer at once. Each child's acknowledgment locks the
    chain root first (lock_ancestors.sql), so one of them sees the other's child done."""
    outcomes = Counter()
    for trial in range(trials):
        parent = submit("t.spawner", {"children": [], "trial": trial})
        up = claim(parent)
        kids = [
            children.spawn(
                up.lease,
                JournalCall(i, "spawn:t.steps", StepKind.SPAWN),
                agent="t.steps",
                input={"kid": i},
                owner="user:alice",
                root_id=parent,
            )
            for i in range(2)
        ]
        end_attempt(up.lease, "wait", waiting_on=kids)
        gots = [claim(kid) for kid in kids]

        stops = racing(2, lambda i, parent=parent: task_stop(task_id=parent, actor=f"user:op{i}", reason="twice"))
        outcomes["stops started"] += sum(1 for s in stops if not isinstance(s, BaseException))
        outcomes["stops refused"] += sum(1 for s in stops if isinstance(s, InvalidTransition))
        answers = racing(2, lambda i, gots=gots: worker_answers(gots[i]))
        outcomes["workers refused"] += answers.count("refused")
        outcomes[f"parent {status(parent)}"] += 1
        outcomes["children cancelled"] += sum(status(k) == states.CANCELLED for k in kids)
        outcomes["duplicate acknowledgments"] += StopAck.objects.filter(task_id__in=[parent, *kids]).count() - 12

    print(f"\ntwo stops, then two last acknowledgments at once, over {trials} trials: {dict(outcomes)}")
    assert outcomes["stops started"] == outcomes["stops refused"] == trials
    assert outcomes["workers refused"] == outcomes["children cancelled"] == 2 * trials
    assert outcomes["parent cancelled"] == trials
    assert outcomes["duplicate acknowledgments"] == 0
