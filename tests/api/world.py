"""An acme world to aim the API at: a queued task, a task blocked on an unknown effect,
an audit event, and alice's token. Built directly where no worker runs in these tests."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from console.access import agent_steward_set
from console.models import ApiToken
from runtime import states
from runtime.authz.services import grant_create
from runtime.models import Attempt, AuditEvent, DependencyTrigger, Effect, Grant, Schedule, Stop, Task, Webhook
from runtime.stops.services import agent_stop, task_stop
from runtime.tasks.services import task_submit
from runtime.triggers.services import dependency_create, schedule_create, webhook_create
from tests.api.conftest import principal_of

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}


@dataclass
class World:
    task: Task
    blocked: Task
    failed: Task
    effect: Effect
    event: AuditEvent
    token: ApiToken
    grant: Grant  # agent:t.steps tool.search on repo:acme/*, by dave; alice holds the right over t.steps
    stopped: Task  # acme, cancelled by alice's stop `stop` (it was queued: every boundary answered at once)
    stop: Stop  # and t.crashes's submission is closed in acme (its kill switch, no task of it live)
    schedule: Schedule  # acme's nightly schedule of t.steps
    webhook: Webhook
    dependency: DependencyTrigger  # t.steps after the queued task

    def fill(self, path: str) -> str:
        return path.format(
            task=self.task.id,
            blocked=self.blocked.id,
            failed=self.failed.id,
            effect=self.effect.id,
            event=self.event.id,
            token=self.token.id,
            grant=self.grant.id,
            stopped=self.stopped.id,
            stop=self.stop.id,
            schedule=self.schedule.id,
            webhook=self.webhook.id,
            dependency=self.dependency.id,
        )


def blocked_task_with_unknown_effect(tenant: str = "acme") -> tuple[Task, Effect]:
    """A task blocked on an effect whose outcome is unknown, as a worker that died
    mid-call leaves it."""
    who = {**ALICE, "tenant": tenant}
    task = Task.objects.get(id=task_submit(agent="t.effect", input={"url": "http://127.0.0.1:9"}, **who).task_id)
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
        tenant=tenant,
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
    task.refresh_from_db()
    return task, effect


def make_world(tokens) -> World:
    task = Task.objects.get(id=task_submit(agent="t.steps", input={"n": 1}, **ALICE).task_id)
    blocked, effect = blocked_task_with_unknown_effect()
    failed = Task.objects.get(id=task_submit(agent="t.steps", input={"n": 2}, **ALICE).task_id)
    Task.objects.filter(id=failed.id).update(status=states.FAILED, finished_at=timezone.now())
    event = AuditEvent.objects.filter(tenant="acme", task_id=task.id).order_by("id").first()
    token = ApiToken.objects.get(prefix=tokens.alice[:12])
    grant = grant_create(
        tenant="acme", principal="agent:t.steps", action="tool.search", resource="repo:acme/*", actor="user:dave"
    )
    dave = token.user.__class__.objects.get(username="dave")
    agent_steward_set(principal=principal_of(dave), name="t.steps", username="alice", allowed=True)
    stopped = Task.objects.get(id=task_submit(agent="t.steps", input={"n": 3}, **ALICE).task_id)
    stop = Stop.objects.get(id=task_stop(task_id=stopped.id, actor="user:alice", reason="wrong input").stop_id)
    agent_stop(tenant="acme", agent="t.crashes", actor="user:alice", reason="incident")
    schedule = schedule_create(
        tenant="acme",
        name="nightly",
        agent="t.steps",
        input={},
        owner="user:alice",
        cron="0 3 * * *",
        actor="user:alice",
    )
    webhook, _ = webhook_create(tenant="acme", name="gh", agent="t.steps", owner="user:alice", actor="user:alice")
    dependency = dependency_create(
        tenant="acme", agent="t.steps", input={}, owner="user:alice", actor="user:alice", prerequisites=[str(task.id)]
    )
    return World(
        task,
        blocked,
        failed,
        effect,
        event,
        token,
        grant,
        Task.objects.get(id=stopped.id),
        stop,
        schedule,
        webhook,
        dependency,
    )
