"""A small acme-and-globex world for the console tests: the personas, a parent task with
a journal, a live child, a blocked task with an unknown effect, a finished one, and a
globex task; made through the runtime's services where one exists, else as rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.utils import timezone

from runtime import states
from runtime.authz import POLICY_VERSION
from runtime.authz.selectors import authz_revision
from runtime.models import Approval, Attempt, AuditEvent, Effect, Step, Task
from runtime.tasks.services import task_submit
from tests.people import make_people


@dataclass
class World:
    people: object
    parent: Task  # acme, running, 3 steps, one live child
    child: Task  # acme, queued, child of parent
    blocked: Task  # acme, blocked on `effect`
    done: Task  # acme, completed
    effect: Effect  # acme, unknown
    other: Task  # globex, queued
    other_effect: Effect
    audit: AuditEvent  # an acme event
    other_audit: AuditEvent  # a globex event
    approval: Approval | None = None  # acme, pending, a request of `blocked` (a row: the task waits on its effect)


def submit(tenant: str, owner: str, **input) -> Task:
    made = task_submit(agent="t.steps", input=input, tenant=tenant, owner=f"user:{owner}", actor=f"user:{owner}")
    return Task.objects.get(id=made.task_id)


def attempt(task: Task, *, ended: bool = False, reason: str = "first", worker: str = "vm:1") -> Attempt:
    now = timezone.now()
    epoch = task.epoch + 1
    Task.objects.filter(id=task.id).update(epoch=epoch)
    return Attempt.objects.create(
        task=task,
        epoch=epoch,
        worker=worker,
        reason=reason,
        started_at=now,
        heartbeat_at=now,
        lease_expires_at=now + timedelta(seconds=30),
        ended_at=now if ended else None,
        end_reason="block" if ended else "",
    )


def steps(task: Task, n: int, *, epoch: int = 1, error_at: int | None = None) -> None:
    now = timezone.now()
    Step.objects.bulk_create(
        Step(
            task=task,
            seq=i,
            name=f"s{i}",
            kind="step",
            output=i if i != error_at else None,
            error={"type": "ValueError", "message": f"bad {i}", "traceback": "Traceback ..."}
            if i == error_at
            else None,
            epoch=epoch,
            started_at=now,
            finished_at=now + timedelta(milliseconds=5),
        )
        for i in range(n)
    )


def unknown_effect(task: Task, at: Attempt, seq: int = 0) -> Effect:
    Task.objects.filter(id=task.id).update(
        status=states.BLOCKED, blocked_reason=states.EFFECT_UNKNOWN, status_note="effect has an unknown outcome"
    )
    return Effect.objects.create(
        key=f"{task.id}/{seq}/send",
        task=task,
        tenant=task.tenant,
        step_seq=seq,
        name="send",
        effect_class="irreversible",
        keyed=False,
        state=states.UNKNOWN,
        request_digest="ab" * 32,
        attempt=at,
        epoch=at.epoch,
        sends=1,
    )


def make_world() -> World:
    people = make_people()
    parent = submit("acme", "alice", n=3)
    Task.objects.filter(id=parent.id).update(status=states.RUNNING)
    attempt(parent)
    steps(parent, 3)
    child = Task.objects.create(
        agent="t.steps",
        input={},
        input_digest="x",
        tenant="acme",
        owner="user:alice",
        pool_id=parent.pool_id,
        parent=parent,
        root=parent,
        spawn_seq=1,
        status=states.QUEUED,
    )
    blocked = submit("acme", "alice", n=1)
    effect = unknown_effect(blocked, attempt(blocked, ended=True))
    done = submit("acme", "alice", n=2)
    Task.objects.filter(id=done.id).update(status=states.COMPLETED, output={"total": 1})
    other = submit("globex", "carol", n=1)
    other_effect = unknown_effect(other, attempt(other, ended=True))
    approval = Approval.objects.create(
        tenant="acme",
        task_id=blocked.id,
        seq=9,
        name="pay",
        agent="t.steps",
        owner="user:alice",
        action={"op": "pay", "amount": 10, "lines": [{"sku": "a", "n": 2}]},
        action_hash="cd" * 32,
        effect_class=states.IRREVERSIBLE,
        # Bound to what the database holds now, as a request would be: an approve checks
        # these (approval_decide.sql) and would find a made-up context stale.
        context={
            "input_digest": Task.objects.get(id=blocked.id).input_digest,
            "precondition": "v1",
            "policy_version": POLICY_VERSION,
            "authz_revision": authz_revision(tenant="acme"),
        },
        context_digest="ef" * 32,
        untrusted=True,
        untrusted_paths=["$.memo"],
        expires_at=timezone.now() + timedelta(hours=2),
    )
    return World(
        approval=approval,
        people=people,
        parent=Task.objects.get(id=parent.id),
        child=child,
        blocked=Task.objects.get(id=blocked.id),
        done=Task.objects.get(id=done.id),
        effect=effect,
        other=Task.objects.get(id=other.id),
        other_effect=other_effect,
        audit=AuditEvent.objects.filter(tenant="acme").order_by("id").first(),
        other_audit=AuditEvent.objects.filter(tenant="globex").order_by("id").first(),
    )


@pytest.fixture
def world(db) -> World:
    return make_world()


@pytest.fixture
def as_person(client):
    """as_person(user): the test client, signed in as that person."""

    def sign_in(user):
        client.force_login(user)
        return client

    return sign_in
