"""`manage.py watch_demo` (console/dev/demo/watch.py), which `make run` starts after its
summary: a line as each seeded demo task finishes or needs an operator, and nothing else."""

from __future__ import annotations

import io

from django.core.management import call_command
from django.utils import timezone

from console.dev.demo.seed import seed_demo
from console.dev.demo.watch import DemoWatch
from runtime import states
from runtime.models import Attempt, Effect, Task


def seeded(agent: str, tenant: str = "acme") -> Task:
    return Task.objects.get(tenant=tenant, agent=agent, parent__isnull=True)


def blocked_on_an_unknown_send(task: Task, epoch: int) -> Effect:
    """What a worker leaves when the notification service acted and dropped the line."""
    now = timezone.now()
    attempt = Attempt.objects.create(
        task=task,
        epoch=epoch,
        worker="w:1",
        reason=states.FIRST,
        started_at=now,
        heartbeat_at=now,
        lease_expires_at=now,
        ended_at=now,
        end_reason="block",
    )
    Task.objects.filter(id=task.id).update(
        status=states.BLOCKED,
        blocked_reason=states.EFFECT_UNKNOWN,
        epoch=epoch,
        status_note="effect 'send' has an unknown outcome: resolve it",
    )
    effect, _ = Effect.objects.update_or_create(
        key=f"{task.id}/0/send",
        defaults=dict(
            task=task,
            step_seq=0,
            name="send",
            effect_class=states.IRREVERSIBLE,
            keyed=False,
            state=states.UNKNOWN,
            request_digest="0" * 64,
            attempt=attempt,
            epoch=epoch,
            sends=epoch,
        ),
    )
    return effect


def finish(task: Task, status: str = states.COMPLETED) -> None:
    Task.objects.filter(id=task.id).update(status=status, finished_at=timezone.now())


def test_the_watch_says_nothing_while_the_demo_runs_and_a_line_when_a_task_needs_an_operator(db):
    seed_demo()
    watch = DemoWatch()
    assert watch.poll() == [] and not watch.done  # queued: nothing to say

    notify = seeded("notify.send")
    effect = blocked_on_an_unknown_send(notify, epoch=1)
    (line,) = watch.poll()

    assert line.startswith(f"demo task notify.send {notify.id} (acme) is blocked: effect #{effect.id} ('send')")
    assert "steward effects --state unknown" in line
    assert f".venv/bin/python manage.py steward resolve-effect {effect.id} --as committed|failed|retry" in line
    assert watch.poll() == []  # said once

    blocked_on_an_unknown_send(notify, epoch=2)  # resolved and blocked again between two looks
    assert [line.split(":")[0] for line in watch.poll()] == [f"demo task notify.send {notify.id} (acme) is blocked"]


def test_the_watch_says_how_to_decide_a_seeded_task_waiting_for_approval(db):
    seed_demo()
    watch = DemoWatch()
    research = seeded("research.batch")
    Task.objects.filter(id=research.id).update(
        status=states.BLOCKED, blocked_reason=states.APPROVAL_PENDING, epoch=2, status_note="waiting for approval 01a2"
    )

    (line,) = watch.poll()

    assert line.startswith(
        f"demo task research.batch {research.id} (acme) waits for a person's approval (waiting for approval 01a2)"
    )
    # The command as the CLI parses it: --actor before the subcommand, --tenant required.
    assert "steward --actor user:alice approvals approve ID --tenant acme" in line
    assert "approvals list --tenant acme" in line


def test_the_watch_says_when_each_task_finishes_and_when_all_have(db):
    seed_demo()
    watch = DemoWatch()
    research, notify = seeded("research.batch"), seeded("notify.send")
    other = seeded("research.batch", tenant="globex")
    assistant, reporter = seeded("research.assistant"), seeded("research.reporter")
    briefer = seeded("research.briefer")
    digests = list(Task.objects.filter(agent="research.digest", parent__isnull=True))  # one per version
    assert len(digests) == 2
    for task in (assistant, reporter, briefer, *digests):
        finish(task)
    lines = watch.poll()
    assert sorted(line.split(" completed (")[0] for line in lines) == sorted(
        f"demo task {task.agent} {task.id} (acme)" for task in (assistant, reporter, briefer, *digests)
    )

    finish(research)
    (line,) = watch.poll()
    assert line.startswith(f"demo task research.batch {research.id} (acme) completed (") and not watch.done

    finish(notify, states.CANCELLED)
    assert watch.poll() == [f"demo task notify.send {notify.id} (acme) cancelled"] and not watch.done
    finish(other)
    (line, last) = watch.poll()
    assert line.startswith(f"demo task research.batch {other.id} (globex) completed (")
    assert last == "every demo task has finished"
    assert watch.done and watch.poll() == []


def test_watch_demo_prints_those_lines_and_exits_once_every_demo_task_has_finished(db):
    seed_demo()
    # Every seeded task, whatever the demo seeds: a demo agent added later is finished here
    # too (a fixed list of them left the command waiting for ever on the new one).
    demo = list(Task.objects.filter(parent__isnull=True))
    assert {task.agent for task in demo} >= {"research.batch", "notify.send", "research.assistant"}
    for task in demo:
        finish(task)
    out = io.StringIO()

    call_command("watch_demo", "--interval", "0.1", stdout=out)

    lines = out.getvalue().splitlines()
    assert len(lines) == len(demo) + 1 and lines[-1] == "every demo task has finished"


def test_the_watch_waits_quietly_for_a_demo_that_was_not_seeded(db):
    assert DemoWatch().poll() == []
