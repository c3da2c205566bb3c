"""`manage.py steward`: what an operator sees in a terminal. Commands print what they
did; refusals exit with code 2 and print the stable error code (runtime/errors.py)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import uuid

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from runtime import states
from runtime.limits.services import pool_create
from runtime.models import Attempt, AuditEvent, Effect, Pool, Task
from runtime.stops.services import task_stop
from runtime.tasks.services import task_submit
from tests.harness import REPO

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def steward(*args: str) -> str:
    """Run `manage.py steward --actor user:alice ARGS` in-process; return its stdout."""
    out = io.StringIO()
    call_command("steward", "--actor", "user:alice", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def refused(*args: str) -> str:
    """Run a command that must be refused; return the message after checking exit code 2."""
    with pytest.raises(CommandError) as error:
        steward(*args)
    assert error.value.returncode == 2
    return str(error.value)


def blocked_task_with_unknown_effect() -> tuple[Task, Effect]:
    """A task blocked on an effect whose outcome is unknown, as a worker that died mid-call
    leaves it (built directly: no worker runs in these tests)."""
    task = Task.objects.get(id=task_submit(agent="t.effect", input={"url": "http://127.0.0.1:9"}, **ALICE).task_id)
    now = timezone.now()
    attempt = Attempt.objects.create(
        task=task,
        epoch=1,
        worker="w:1",
        reason=states.FIRST,
        started_at=now,
        heartbeat_at=now,
        lease_expires_at=now,
        ended_at=now,
        end_reason="block",
    )
    Task.objects.filter(id=task.id).update(status=states.BLOCKED, blocked_reason=states.EFFECT_UNKNOWN, epoch=1)
    effect = Effect.objects.create(
        key=f"{task.id}/1/submit",
        task=task,
        step_seq=1,
        name="submit",
        effect_class=states.IRREVERSIBLE,
        keyed=False,
        state=states.UNKNOWN,
        request_digest="0" * 64,
        attempt=attempt,
        epoch=1,
        sends=1,
    )
    return task, effect


# --- commands that work ----------------------------------------------------------------------


def test_submit_prints_the_new_task_id_and_a_repeat_of_its_key_names_the_same_task(db):
    out = steward("submit", "t.steps", "--input", '{"n": 2}', "--tenant", "acme", "--key", "cli-1")

    match = re.fullmatch(rf"({UUID})  submitted  \[queued\]\n", out)
    assert match, out
    task = Task.objects.get(id=match.group(1))
    assert (task.agent, task.input, task.tenant, task.owner) == ("t.steps", {"n": 2}, "acme", "user:alice")

    again = steward("submit", "t.steps", "--input", '{"n": 2}', "--tenant", "acme", "--key", "cli-1")
    assert again == f"{task.id}  already exists for key 'cli-1'  [queued]\n"
    assert Task.objects.count() == 1


def test_tasks_lists_tasks_with_their_status_and_filters_by_status(db):
    queued = task_submit(agent="t.steps", input={}, **ALICE).task_id
    cancelled = task_submit(agent="t.child", input={"value": 1}, **ALICE).task_id
    task_stop(task_id=cancelled, actor="user:alice", reason="test")

    out = steward("tasks")
    assert out.splitlines()[0].split() == ["task", "agent", "status", "epoch", "pool", "updated", "note"]
    rows = {line.split()[0]: line.split()[1:3] for line in out.splitlines()[2:]}
    assert rows == {str(queued): ["t.steps", "queued"], str(cancelled): ["t.child", "cancelled"]}

    only = steward("tasks", "--status", "cancelled")
    assert str(cancelled) in only and str(queued) not in only
    assert "(none)" in steward("tasks", "--agent", "no.such.agent")


def test_show_prints_a_tasks_record_attempts_journal_effects_children_and_audit(db):
    task, effect = blocked_task_with_unknown_effect()

    out = steward("show", str(task.id))

    assert re.search(rf"^\s+task  {task.id}$", out, re.M)
    assert re.search(r"^\s+status  blocked$", out, re.M)
    # What an operator may do, and why not (runtime/tasks/actions.py), as the API says.
    assert re.search(r"^\s+blocked  effect_unknown \(resolve the effect: resolve-effect\)$", out, re.M)
    assert re.search(r"^\s+actions  stop; resume refused \(effect_unknown\); rerun refused \(status\)$", out, re.M)
    assert re.search(r"^\s*tenant/owner  acme / user:alice$", out, re.M)
    for section in ("attempts", "journal", "effects", "children", "audit"):
        assert re.search(rf"^{section}$", out, re.M), section
    assert re.search(r"^1 +first +w:1 .* block$", out, re.M)
    assert re.search(rf"^{effect.id} +submit +irreversible +False +unknown +1 +{re.escape(effect.key)}$", out, re.M)
    assert "task.submitted" in out


def test_show_cuts_long_values_and_says_so_and_full_prints_them_whole(db):
    long = {"text": "x" * 500 + " the end"}
    task_id = task_submit(agent="t.steps", input=long, **ALICE).task_id
    whole = json.dumps(long)

    cut = steward("show", str(task_id))
    assert whole not in cut and re.search(r"^\s+input  \{\"text\": \"x+…$", cut, re.M)
    assert cut.endswith("(long values are cut to fit: --full prints them whole, --json as JSON)\n")

    full = steward("show", str(task_id), "--full")
    assert re.search(rf"^\s+input  {re.escape(whole)}$", full, re.M)
    assert "long values are cut" not in full


def test_show_json_prints_the_whole_detail_as_one_json_object(db):
    task, effect = blocked_task_with_unknown_effect()
    Task.objects.filter(id=task.id).update(output={"blob": "y" * 5000})

    detail = json.loads(steward("show", str(task.id)[:30], "--json"))

    assert set(detail) == {"task", "attempts", "journal", "effects", "children", "audit", "tree_pause", "actions"}
    assert detail["actions"] == {
        "resume": {"allowed": False, "refusal": "effect_unknown"},
        "stop": {"allowed": True, "refusal": None},
        "rerun": {"allowed": False, "refusal": "status"},
        "released_by": "unblock",
    }
    assert detail["tree_pause"] is None  # its tree is not paused (tests/runtime/test_tree_pause.py)
    assert detail["task"]["id"] == str(task.id) and detail["task"]["status"] == states.BLOCKED
    assert detail["task"]["output"] == {"blob": "y" * 5000}
    assert detail["task"]["pool_id"] == "default"
    assert [(a["epoch"], a["end_reason"]) for a in detail["attempts"]] == [(1, "block")]
    assert [(e["id"], e["state"], e["key"]) for e in detail["effects"]] == [(effect.id, "unknown", effect.key)]
    audit = AuditEvent.objects.filter(task_id=task.id).order_by("chain_seq")
    assert [(a["kind"], a["hash"]) for a in detail["audit"]] == [(a.kind, bytes(a.hash).hex()) for a in audit]
    assert detail["children"] == [] and detail["journal"] == []


def test_effects_lists_the_ledger_and_resolve_effect_settles_one_and_unblocks_its_task(db):
    task, effect = blocked_task_with_unknown_effect()

    listing = steward("effects", "--state", "unknown")
    assert re.search(rf"^{effect.id} +{task.id} +submit +irreversible +unknown +1 ", listing, re.M)
    assert "(none)" in steward("effects", "--state", "committed")

    out = steward("resolve-effect", str(effect.id), "--as", "failed", "--note", "the service has no record")

    assert out == f"effect #{effect.id} is now failed; task {task.id} re-queued if it was blocked\n"
    effect.refresh_from_db()
    assert (effect.state, effect.resolved_by) == (states.EFFECT_FAILED, "user:alice")
    assert Task.objects.get(id=task.id).status == states.QUEUED
    assert list(AuditEvent.objects.filter(task_id=task.id).order_by("id").values_list("kind", flat=True))[-2:] == [
        "effect.resolved",
        "task.unblocked",
    ]


def test_pools_shows_limits_and_usage_and_pool_changes_them(db):
    pool_create(actor="user:alice", name="batch", max_running=2, max_queued=5)
    task_submit(agent="t.steps", input={}, pool="batch", **ALICE)

    assert steward("pool", "batch", "--max-running", "3", "--max-queued", "7") == "batch (running≤3, queued≤7)\n"

    out = steward("pools")
    assert out.splitlines()[0].split() == ["pool", "max_running", "max_queued", "running", "queued", "slots_held"]
    assert re.search(r"^batch +3 +7 +0 +1 +0$", out, re.M), out


def test_pool_create_and_pool_remove_print_what_they_did_and_are_audited(db):
    out = steward("pool-create", "reports", "--max-running", "4", "--max-queued", "100", "--note", "weekly")
    assert out == "created reports (running≤4, queued≤100)\n"
    assert Pool.objects.get(name="reports").slots.count() == 4

    assert steward("pool-remove", "reports", "--note", "not needed") == "removed pool reports\n"
    assert not Pool.objects.filter(name="reports").exists()
    created, removed = AuditEvent.objects.filter(chain="tenant:system").order_by("id")
    assert (created.kind, created.actor, created.data["why"]) == ("pool.created", "user:alice", "weekly")
    assert (removed.kind, removed.actor, removed.data["why"]) == ("pool.removed", "user:alice", "not needed")


def test_agents_lists_every_registered_agent_with_its_pool(db):
    out = steward("agents")
    assert re.search(r"^t\.steps +default$", out, re.M)
    assert re.search(r"^research\.batch +research +Plan experiments", out, re.M)


def test_cancel_and_resume_print_what_they_did(db):
    task_id = task_submit(agent="t.steps", input={}, **ALICE).task_id

    stopped = steward("cancel", str(task_id), "--reason", "oops")
    assert re.fullmatch(f"stop {UUID}: 1 task\\(s\\), 1 cancelled, 0 stopping\n  {task_id}  cancelled\n", stopped)
    assert steward("resume", str(task_id)) == f"{task_id} queued for a new attempt (reason: resume)\n"

    task = Task.objects.get(id=task_id)
    assert (task.status, task.next_reason) == (states.QUEUED, states.RESUME)
    assert AuditEvent.objects.get(task_id=task_id, kind="task.resumed").actor == "user:alice"


def test_audit_verify_prints_verified_and_how_many_rows_it_checked(live):
    # live, not db: verify reads chain ranges on connections of its own, which see only
    # committed rows.
    assert re.fullmatch(
        r"audit trail verified: every chain is intact, and so is every seal \(0 rows in \d+\.\d s\)\n",
        steward("audit", "verify"),
    )
    task_submit(agent="t.steps", input={}, **ALICE)

    out = steward("audit", "verify")

    checked = re.fullmatch(
        r"audit trail verified: every chain is intact, and so is every seal \((\d+) rows in "
        r"\d+\.\d s, "
        r"[\d,]+ rows/s\)\n",
        out,
    )
    assert checked, out
    assert int(checked.group(1)) == AuditEvent.objects.count() == 2  # the default pool's creation, the submit


# --- refusals: exit code 2 and the stable code ---------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["submit", "no.such.agent"], "UNKNOWN_AGENT"),
        (["submit", "t.steps", "--input", "[1, 2]"], "INVALID_INPUT"),
        (["submit", "t.steps", "--input", "{not json"], "INVALID_INPUT"),
        (["submit", "t.steps", "--input", "@/nonexistent/input.json"], "INVALID_INPUT"),
        (["submit", "research.batch", "--input", '{"question": ""}'], "INVALID_INPUT"),
        (["show", str(uuid.UUID(int=1))], "TASK_NOT_FOUND"),
        (["show", "not-a-task"], "TASK_NOT_FOUND"),
        (["cancel", str(uuid.UUID(int=1)), "--reason", "x"], "TASK_NOT_FOUND"),
        (["stop", str(uuid.UUID(int=1)), "--reason", "x"], "TASK_NOT_FOUND"),
        (["stop-summary", str(uuid.UUID(int=1))], "TASK_NOT_FOUND"),
        (["rerun", str(uuid.UUID(int=1)), "--reason", "x"], "TASK_NOT_FOUND"),
        (["resume", str(uuid.UUID(int=1))], "TASK_NOT_FOUND"),
        (["effects", "--task", str(uuid.UUID(int=1))], "TASK_NOT_FOUND"),
        (["resolve-effect", "987654", "--as", "failed"], "EFFECT_NOT_FOUND"),
        (["submit", "t.steps", "--pool", "nosuch"], "UNKNOWN_POOL"),
        (["pool", "nosuch", "--max-running", "3"], "UNKNOWN_POOL"),
        (["pool-remove", "nosuch"], "UNKNOWN_POOL"),
        (["pool-create", "default", "--max-running", "1", "--max-queued", "1"], "POOL_EXISTS"),
    ],
    ids=lambda value: value if isinstance(value, str) else "-".join(value[:2]),
)
def test_a_refused_command_exits_2_and_prints_the_stable_code(db, args, code):
    task_submit(agent="t.steps", input={}, **ALICE)  # creates the default pool
    before = (Task.objects.count(), AuditEvent.objects.count(), Pool.objects.count())
    assert refused(*args).startswith(f"{code}: ")
    assert (Task.objects.count(), AuditEvent.objects.count(), Pool.objects.count()) == before


def test_a_full_pool_refuses_a_submit_with_queue_full(db):
    pool_create(actor="user:alice", name="tiny", max_running=1, max_queued=0)
    steward("submit", "t.steps", "--pool", "tiny")
    assert refused("submit", "t.steps", "--pool", "tiny").startswith("QUEUE_FULL: pool 'tiny' is full")


def test_a_reused_key_with_other_input_is_refused_with_idempotency_conflict(db):
    steward("submit", "t.steps", "--input", '{"n": 1}', "--key", "k")
    assert refused("submit", "t.steps", "--input", '{"n": 2}', "--key", "k").startswith("IDEMPOTENCY_CONFLICT: ")


@pytest.mark.parametrize("status", [states.QUEUED, states.COMPLETED])
def test_resuming_a_task_that_is_not_dead_failed_or_cancelled_is_an_invalid_transition(db, status):
    task_id = task_submit(agent="t.steps", input={}, **ALICE).task_id
    Task.objects.filter(id=task_id).update(status=status)
    audit_rows = AuditEvent.objects.count()

    message = refused("resume", str(task_id))

    assert message.startswith(f"INVALID_TRANSITION: task {task_id} is {status}")
    assert Task.objects.get(id=task_id).status == status
    assert AuditEvent.objects.count() == audit_rows


@pytest.mark.parametrize("state", [states.COMMITTED, states.EFFECT_FAILED, states.INTENT])
def test_resolving_an_effect_that_is_not_unknown_names_its_state(db, state):
    task, effect = blocked_task_with_unknown_effect()
    Effect.objects.filter(id=effect.id).update(state=state)
    audit_rows = AuditEvent.objects.count()

    message = refused("resolve-effect", str(effect.id), "--as", "committed")

    assert message == (
        f"INVALID_TRANSITION: effect #{effect.id} is {state}, not unknown: only an unknown effect is resolved"
    )
    assert (Effect.objects.get(id=effect.id).state, AuditEvent.objects.count()) == (state, audit_rows)


def test_resolving_an_effect_a_second_time_says_how_the_first_resolved_it(db):
    task, effect = blocked_task_with_unknown_effect()
    steward("resolve-effect", str(effect.id), "--as", "failed")

    message = refused("resolve-effect", str(effect.id), "--as", "committed")

    assert message.startswith(f"INVALID_TRANSITION: effect #{effect.id} is failed, not unknown")


@pytest.mark.parametrize("ended_by", [states.COMPLETED, states.FAILED, states.CANCELLED])
def test_cancelling_a_finished_task_is_an_invalid_transition_however_it_finished(db, ended_by):
    """A second cancel is refused like a cancel of a completed task: both are too late."""
    task_id = task_submit(agent="t.steps", input={}, **ALICE).task_id
    if ended_by == states.CANCELLED:
        steward("cancel", str(task_id), "--reason", "first")
    else:
        Task.objects.filter(id=task_id).update(status=ended_by)
    audit_rows = AuditEvent.objects.count()

    message = refused("cancel", str(task_id), "--reason", "second")

    assert message == f"INVALID_TRANSITION: task {task_id} is {ended_by}; only a live task can be stopped"
    assert Task.objects.get(id=task_id).status == ended_by
    assert AuditEvent.objects.count() == audit_rows


def test_cancelling_a_finished_task_still_cancels_its_live_children(db):
    parent = task_submit(agent="t.steps", input={}, **ALICE).task_id
    child = Task.objects.get(id=task_submit(agent="t.steps", input={}, **ALICE).task_id)
    Task.objects.filter(id=child.id).update(parent_id=parent, root_id=parent, spawn_seq=1)
    Task.objects.filter(id=parent).update(status=states.COMPLETED)

    assert steward("stop", str(parent), "--reason", "tidy").endswith(f"\n  {child.id}  cancelled\n")
    assert Task.objects.get(id=child.id).status == states.CANCELLED


def test_stop_summary_prints_each_boundary_in_words_and_json_prints_it_whole(db):
    task_id = task_submit(agent="t.steps", input={}, **ALICE).task_id
    Task.objects.filter(id=task_id).update(status=states.RUNNING, epoch=1)
    now = timezone.now()
    Attempt.objects.create(
        task_id=task_id,
        epoch=1,
        worker="vm:1",
        reason=states.FIRST,
        started_at=now,
        heartbeat_at=now,
        lease_expires_at=now + timezone.timedelta(seconds=30),
    )
    out = steward("stop", str(task_id)[:13], "--reason", "runaway")
    assert f"  {task_id}  stopping\n" in out and f"follow it: steward stop-summary {task_id}" in out

    summary = steward("stop-summary", str(task_id))
    assert "state  stopping" in summary and "reason  runaway" in summary
    assert re.search(rf"^{task_id}  stopping  worker +waiting ", summary, re.M), summary
    assert re.search(rf"^{task_id}  stopping  storage +acknowledged .* storage +{{", summary, re.M), summary
    assert "unresolved: 1 acknowledgment still awaited" in summary

    whole = json.loads(steward("stop-summary", str(task_id), "--json"))
    assert whole["stop"]["reason"] == "runaway" and whole["stopping"] == 1
    assert {b["boundary"]: b["state"] for b in whole["tasks"][0]["boundaries"]}["worker"] == "waiting"


def test_rerun_makes_a_new_task_linked_to_the_cancelled_one(db):
    task_id = task_submit(agent="t.steps", input={"n": 4}, **ALICE).task_id
    steward("stop", str(task_id), "--reason", "wrong")
    out = steward("rerun", str(task_id), "--reason", "again, deliberately")
    new = uuid.UUID(out.split()[0])
    assert out == f"{new}  a new run of {task_id}  [queued]\n"
    assert Task.objects.get(id=new).rerun_of_id == task_id
    assert refused("rerun", str(new), "--reason", "it is queued").startswith("INVALID_TRANSITION: ")


def test_agent_stop_closes_submission_until_agent_reopen(live):
    # live, not db: the refused insert aborts the transaction it runs in.
    task_id = task_submit(agent="t.steps", input={}, **ALICE).task_id
    out = steward("agent-stop", "t.steps", "--tenant", "acme", "--reason", "incident")
    assert out.startswith("agent t.steps is stopped in acme: submission closed until agent-reopen\n")
    assert f"  {task_id}  cancelled" in out
    assert refused("submit", "t.steps", "--tenant", "acme").startswith("AGENT_STOPPED: ")
    assert steward("agent-reopen", "t.steps", "--tenant", "acme") == "agent t.steps is open in acme\n"
    assert steward("agent-reopen", "t.steps", "--tenant", "acme") == (
        "agent t.steps is open in acme (it was open already)\n"
    )
    assert "submitted" in steward("submit", "t.steps", "--tenant", "acme")


# --- a real process --------------------------------------------------------------------------


def run_manage(child_env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "steward", "--actor", "user:alice", *args],
        cwd=REPO,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_real_command_exits_0_on_success_and_2_with_the_code_on_a_refusal(live, child_env):
    ok = run_manage(child_env, "submit", "t.steps", "--tenant", "acme", "--input", '{"n": 1}')
    assert ok.returncode == 0, ok.stderr
    task_id = re.fullmatch(rf"({UUID})  submitted  \[queued\]\n", ok.stdout).group(1)
    assert Task.objects.get(id=task_id).owner == "user:alice"  # committed by the other process

    bad = run_manage(child_env, "submit", "no.such.agent")
    assert bad.returncode == 2
    assert "UNKNOWN_AGENT: no agent is registered as 'no.such.agent'" in bad.stderr
    assert bad.stdout == ""
    assert Task.objects.count() == 1


def test_show_says_what_releases_every_kind_of_block():
    """A new blocked_reason without its line would make `show` fail on such a task."""
    from runtime.management.commands.steward import RELEASES
    from runtime.tasks.actions import task_actions

    released = {
        r: task_actions(Task(status=states.BLOCKED, blocked_reason=r)).released_by for r in states.BLOCKED_REASONS
    }
    assert set(RELEASES) == set(released.values()) and None not in released.values()
    # not "change the grants", as it once said
    assert "approvals" in RELEASES[released[states.APPROVAL_PENDING]]
