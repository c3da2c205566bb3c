"""Tasks: submit, list, one task with its journal, attempts, effects, children and audit
events, and resume (stopping: console/api/stops.py)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from django.http import HttpResponse
from django.utils import timezone
from ninja import Header, Router, Schema, Status
from pydantic import Field

from console.api.audit import AuditEventOut, audit_out
from console.api.auth import operating, principal
from console.api.effects import EffectOut, effect_out
from console.api.errors import refuses
from console.api.schemas import Body, Int, Moment, Name, Page, PoolName, Uuid, cursor_query, limit_query, page_of
from runtime import states
from runtime.effects.selectors import effect_page
from runtime.errors import (
    AgentStopped,
    ArgumentOutOfRange,
    Forbidden,
    IdempotencyConflict,
    InputTooDeep,
    InputTooLarge,
    InvalidArgument,
    InvalidIdentifier,
    InvalidInput,
    InvalidString,
    InvalidTransition,
    NumberOutOfRange,
    QueueFull,
    TaskNotFound,
    TaskNotUpgradable,
    UnknownAgent,
    UnknownPool,
    UpgradeDoesNotReplay,
    UpgradeRaced,
    VersionNotServed,
    VersionRetired,
)
from runtime.limits.selectors import tree_pause_of
from runtime.tasks.actions import RELEASING, Refusal, task_actions
from runtime.tasks.selectors import (
    attempt_page,
    live_attempt,
    step_page,
    task_get,
    task_page,
    task_waits_for_version,
)
from runtime.tasks.services import task_resume, task_submit
from runtime.trail.selectors import audit_page
from runtime.versions.services import task_upgrade

router = Router(tags=["tasks"])

TaskStatus = Literal[states.TASK_STATUSES]


class TaskSubmit(Body):
    agent: Name = Field(description="a registered agent (GET /agents)")
    input: dict[str, Any] = Field(default_factory=dict, description="a JSON object fitting the agent's input schema")
    pool: PoolName | None = Field(None, description="the pool to admit it to; default: the agent's")


class Submitted(Schema):
    id: uuid.UUID
    status: TaskStatus
    created: bool = Field(description="false: the Idempotency-Key matched a task made earlier")


class TaskSummary(Schema):
    id: uuid.UUID
    agent: str
    status: TaskStatus
    tenant: str
    owner: str
    pool: str
    epoch: int = Field(description="the latest attempt's number; 0 before the first claim")
    parent: uuid.UUID | None
    root: uuid.UUID | None
    idempotency_key: str | None
    status_note: str
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


class TreePauseOut(Schema):
    id: int
    root: uuid.UUID
    tripped_task: uuid.UUID = Field(description="the task whose spawn tripped the breaker")
    breaker: str = Field(description="fanout_children, fanout_depth or fanout_rate")
    limit: int
    observed: int
    paused_at: datetime
    held_at_pause: int = Field(description="idle tasks (queued, sleeping, waiting) the pause held at once")
    holding: int = Field(description="tasks blocked by it now (tree_paused): what a resume queues again")
    running: int = Field(description="tasks of the tree still running: each stops before its next new step")


class LeaseOut(Schema):
    worker: str = Field(description="the worker process holding the lease (worker:<host>:<pid>...)")
    epoch: int = Field(description="the live attempt's number")
    started_at: datetime
    heartbeat_at: datetime = Field(description="its last renewal")
    lease_expires_at: datetime
    expired: bool = Field(description="past its expiry unrenewed: a sweep gives the task to another worker")


class VerdictOut(Schema):
    allowed: bool
    refusal: Literal[tuple(r.value for r in Refusal)] | None = Field(
        description="why not, while not allowed: status (its status is not one the action starts from), "
        "finished, stopping (already, under an earlier stop), effect_unknown (resolve the effect), "
        "approval_pending (its decision releases it) or child (rerun its root)"
    )


class ActionsOut(Schema):
    resume: VerdictOut = Field(description="POST /tasks/{id}/resume")
    stop: VerdictOut = Field(description="POST /tasks/{id}/stop")
    rerun: VerdictOut = Field(description="POST /tasks/{id}/rerun")
    released_by: Literal[tuple(e.value for e in RELEASING)] | None = Field(
        description="while blocked: the event that releases it (docs/state-machines.md): unblock (its effect "
        "resolved), decided (its approval decided or expired), or resume, reset, release (a resume)"
    )


class TaskOut(TaskSummary):
    input: Any
    output: Any
    error: Any
    next_reason: str
    crash_count: int
    wake_at: datetime | None
    waiting_on: list[uuid.UUID] | None
    agent_version: str | None = Field(
        description="the version of its agent's code it runs, fixed when it started (its first claim); "
        "null: not started yet; '': submitted before versions"
    )
    waiting_for_version: str | None = Field(
        description="queued, and no live worker serves its agent version: it waits for one (it does not fail); "
        "'any version': not started, and no live worker serves its agent at all"
    )
    spawn_seq: int | None
    queued_at: datetime | None
    started_at: datetime | None
    stop: uuid.UUID | None = Field(
        description="the stop it is (or was last) under: GET /stops/{id}; null: none, "
        "or a resume cleared it (GET /tasks/{id}/stop-summary still finds it)"
    )
    stop_deadline: datetime | None = Field(description="while stopping: when its stop stops waiting for it")
    rerun_of: uuid.UUID | None = Field(description="the cancelled task this is a deliberate new run of")
    blocked_reason: str | None = Field(
        description="while blocked: effect_unknown, authority_denied, approval_pending, breaker_tripped or tree_paused"
    )
    breaker: str | None = Field(
        description="while blocked by a breaker: which one (docs/limits.md); "
        "`error` holds its limit and what was observed"
    )
    breaker_limits: dict[str, int] | None = Field(description="limits an operator set for this task alone")
    tree_pause: TreePauseOut | None = Field(
        description="its tree's open pause: a fan-out breaker tripped in the "
        "tree, and no task of it takes a new step or spawns until a "
        "resume of any of them lifts it (docs/limits.md)"
    )
    lease_holder: LeaseOut | None = Field(
        description="the live attempt holding the task's lease, as the console's task page shows it; "
        "null while no attempt runs"
    )
    actions: ActionsOut = Field(
        description="what an operator may do to it now, as read, and why not: the console and the CLI "
        "ask the same (the action's route still decides)"
    )


class Resumed(TaskOut):
    tree_pause_lifted: int | None = Field(description="the id of the tree pause this resume lifted, if any")
    tree_queued: int = Field(description="the other tasks of the tree that lifting it queued again")


class StepOut(Schema):
    seq: int
    name: str
    kind: str
    output: Any
    error: Any
    epoch: int = Field(description="the attempt that wrote it")
    started_at: datetime
    finished_at: datetime
    duration_ms: float


class AttemptOut(Schema):
    epoch: int
    worker: str
    reason: str
    started_at: datetime
    heartbeat_at: datetime
    lease_expires_at: datetime
    ended_at: datetime | None
    end_reason: str


class Upgrade(Body):
    version: str | None = Field(None, max_length=64, description="the version; default: the current one")


class Upgraded(TaskOut):
    from_version: str
    replayed: int = Field(description="journal rows the dry replay matched on the new version")


class Resume(Body):
    note: str = Field("", max_length=2000)
    # Checked by the runtime (arguments.breaker_limits), whatever JSON arrives: a value
    # out of its bounds is 400 ARGUMENT_OUT_OF_RANGE, an unknown key 400 INVALID_ARGUMENT.
    limits: dict[str, Any] | None = Field(
        None,
        description="breaker limits for this task alone, over its agent's "
        "and the fleet's (docs/limits.md): max_children, "
        "max_depth, max_spawns_per_minute, max_steps, "
        "max_wall_clock_seconds; integers from 1",
    )


def summary_out(task) -> dict:
    return {
        "id": task.id,
        "agent": task.agent,
        "status": task.status,
        "tenant": task.tenant,
        "owner": task.owner,
        "pool": task.pool_id,
        "epoch": task.epoch,
        "parent": task.parent_id,
        "root": task.root_id,
        "idempotency_key": task.idempotency_key,
        "status_note": task.status_note,
        "created_at": task.created_at,
        "updated_at": task.updated_at,
        "finished_at": task.finished_at,
    }


def task_out(task) -> dict:
    return {
        **summary_out(task),
        "input": task.input,
        "output": task.output,
        "error": task.error,
        "next_reason": task.next_reason,
        "crash_count": task.crash_count,
        "wake_at": task.wake_at,
        "waiting_on": task.waiting_on,
        "agent_version": task.agent_version,
        "waiting_for_version": task_waits_for_version(task),
        "spawn_seq": task.spawn_seq,
        "queued_at": task.queued_at,
        "started_at": task.started_at,
        "stop": task.stop_id,
        "stop_deadline": task.stop_deadline,
        "rerun_of": task.rerun_of_id,
        "blocked_reason": task.blocked_reason,
        "breaker": task.breaker,
        "breaker_limits": task.breaker_limits,
        "tree_pause": tree_pause_out(tree_pause_of(task)),
        "lease_holder": lease_out(live_attempt(task)),
        "actions": task_actions(task).as_dict(),
    }


def lease_out(attempt) -> dict | None:
    if attempt is None:
        return None
    return {
        "worker": attempt.worker,
        "epoch": attempt.epoch,
        "started_at": attempt.started_at,
        "heartbeat_at": attempt.heartbeat_at,
        "lease_expires_at": attempt.lease_expires_at,
        "expired": attempt.lease_expires_at < timezone.now(),
    }


def tree_pause_out(pause) -> dict | None:
    if pause is None:
        return None
    return {
        "id": pause.id,
        "root": pause.root_id,
        "tripped_task": pause.task_id,
        "breaker": pause.breaker,
        "limit": pause.limit,
        "observed": pause.observed,
        "paused_at": pause.paused_at,
        "held_at_pause": pause.held_at_pause,
        "holding": pause.holding,
        "running": pause.running,
    }


def step_out(step) -> dict:
    return {
        "seq": step.seq,
        "name": step.name,
        "kind": step.kind,
        "output": step.output,
        "error": step.error,
        "epoch": step.epoch,
        "started_at": step.started_at,
        "finished_at": step.finished_at,
        "duration_ms": round((step.finished_at - step.started_at).total_seconds() * 1000, 3),
    }


def attempt_out(attempt) -> dict:
    return {
        "epoch": attempt.epoch,
        "worker": attempt.worker,
        "reason": attempt.reason,
        "started_at": attempt.started_at,
        "heartbeat_at": attempt.heartbeat_at,
        "lease_expires_at": attempt.lease_expires_at,
        "ended_at": attempt.ended_at,
        "end_reason": attempt.end_reason,
    }


@router.post(
    "/tasks",
    response={200: Submitted, 201: Submitted},
    summary="Submit a task",
    openapi_extra={
        "responses": {
            201: {
                "headers": {
                    "Location": {"description": "the new task: GET it there", "schema": {"type": "string"}},
                }
            }
        }
    },
)
@refuses(
    Forbidden,
    UnknownAgent,
    InvalidIdentifier,
    UnknownPool,
    InvalidInput,
    InputTooLarge,
    InputTooDeep,
    NumberOutOfRange,
    InvalidString,
    IdempotencyConflict,
    AgentStopped,
    QueueFull,
    VersionRetired,
)
def submit(
    request,
    response: HttpResponse,
    body: TaskSubmit,
    idempotency_key: str | None = Header(None, alias="Idempotency-Key", max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$"),
):
    """Create a task owned by the token's person in its tenant. With an `Idempotency-Key`,
    the same key and input return the task made earlier (200) whatever its status; the
    same key with another agent or input is IDEMPOTENCY_CONFLICT (409). A new task is 201,
    with its URL in `Location`. An input that does not fit the agent's schema is 422
    naming each failing field."""
    with operating(request) as who:
        made = task_submit(
            agent=body.agent,
            input=body.input,
            tenant=who.tenant,
            owner=who.actor,
            actor=who.actor,
            idempotency_key=idempotency_key,
            pool=body.pool,
        )
    if made.created:
        response["Location"] = f"{request.path.rstrip('/')}/{made.task_id}"
    return Status(201 if made.created else 200, {"id": made.task_id, "status": made.status, "created": made.created})


@router.get("/tasks", response={200: Page[TaskSummary]}, summary="List tasks, newest first")
@refuses(InvalidInput, TaskNotFound)
def list_tasks(
    request,
    status: TaskStatus | None = None,
    agent: Name | None = None,
    pool: PoolName | None = None,
    parent: Uuid | None = None,
    root: Uuid | None = None,
    created_after: Moment | None = None,
    created_before: Moment | None = None,
    cursor: str | None = cursor_query(),
    limit: Int = limit_query(),
):
    """Keyset pages (docs/api.md): tasks submitted while a client pages never make a page
    repeat or skip a task. `created_after` is inclusive, `created_before` exclusive. A
    `parent` or `root` that names no task of yours is TASK_NOT_FOUND (404); a cursor
    this list did not give, with these filters, is INVALID_INPUT (422)."""
    page = task_page(
        tenant=principal(request).tenant,
        status=status,
        agent=agent,
        pool=pool,
        parent=parent,
        root=root,
        created_after=created_after,
        created_before=created_before,
        after=cursor,
        limit=limit,
    )
    return page_of(page, summary_out)


@router.get("/tasks/{task_id}", response={200: TaskOut}, summary="One task")
@refuses(TaskNotFound)
def detail(request, task_id: Uuid):
    return task_out(task_get(task_id, tenant=principal(request).tenant))


@router.get("/tasks/{task_id}/steps", response={200: Page[StepOut]}, summary="A task's journal, newest step first")
@refuses(TaskNotFound, InvalidInput)
def steps(request, task_id: Uuid, cursor: str | None = cursor_query(), limit: Int = limit_query()):
    return page_of(step_page(task=task_id, tenant=principal(request).tenant, after=cursor, limit=limit), step_out)


@router.get("/tasks/{task_id}/attempts", response={200: Page[AttemptOut]}, summary="A task's attempts, newest first")
@refuses(TaskNotFound, InvalidInput)
def attempts(request, task_id: Uuid, cursor: str | None = cursor_query(), limit: Int = limit_query()):
    return page_of(attempt_page(task=task_id, tenant=principal(request).tenant, after=cursor, limit=limit), attempt_out)


@router.get(
    "/tasks/{task_id}/effects",
    response={200: Page[EffectOut]},
    summary="A task's effect ledger, by step, newest first",
)
@refuses(TaskNotFound, InvalidInput)
def effects(request, task_id: Uuid, cursor: str | None = cursor_query(), limit: Int = limit_query()):
    return page_of(effect_page(tenant=principal(request).tenant, task=task_id, after=cursor, limit=limit), effect_out)


@router.get(
    "/tasks/{task_id}/children",
    response={200: Page[TaskSummary]},
    summary="A task's children, newest spawn first",
)
@refuses(TaskNotFound, InvalidInput)
def children(request, task_id: Uuid, cursor: str | None = cursor_query(), limit: Int = limit_query()):
    # Another tenant's task is not found (task_page), never an empty page.
    return page_of(task_page(tenant=principal(request).tenant, parent=task_id, after=cursor, limit=limit), summary_out)


@router.get(
    "/tasks/{task_id}/audit",
    response={200: Page[AuditEventOut]},
    summary="A task's audit chain, newest first",
)
@refuses(TaskNotFound, InvalidInput)
def audit(request, task_id: Uuid, cursor: str | None = cursor_query(), limit: Int = limit_query()):
    return page_of(audit_page(tenant=principal(request).tenant, task=task_id, after=cursor, limit=limit), audit_out)


@router.post(
    "/tasks/{task_id}/resume",
    response={200: Resumed},
    summary="Queue a dead, failed, cancelled, denied, tripped or paused task again",
)
@refuses(Forbidden, TaskNotFound, InvalidTransition, InvalidArgument, ArgumentOutOfRange, InvalidString)
def resume(request, task_id: Uuid, body: Resume | None = None):
    """Refused (409) while its last attempt has not stopped, or from any other status.
    In a paused tree it also lifts the pause: `tree_queued` other tasks are queued again.
    The body is optional."""
    body = body or Resume()
    with operating(request) as who:
        task = task_get(task_id, tenant=who.tenant)
        resumed = task_resume(task_id=task.id, actor=who.actor, note=body.note, limits=body.limits)
    return {
        **task_out(task_get(task.id, tenant=who.tenant)),
        "tree_pause_lifted": resumed.pause_id,
        "tree_queued": resumed.tree_queued,
    }


@router.post(
    "/tasks/{task_id}/upgrade",
    response={200: Upgraded},
    summary="Move a task to another version of its agent, if its journal replays there",
)
@refuses(
    Forbidden,
    TaskNotFound,
    TaskNotUpgradable,
    UpgradeDoesNotReplay,
    UpgradeRaced,
    VersionNotServed,
    UnknownAgent,
)
def upgrade(request, task_id: Uuid, body: Upgrade | None = None):
    """A dry replay of its journal on the new version runs first, in this process and
    without side effects: a divergence is 409 UPGRADE_DOES_NOT_REPLAY and nothing changes.
    Only between attempts (409 TASK_NOT_UPGRADABLE); 409 UPGRADE_RACED when an attempt
    claimed it meanwhile."""
    body = body or Upgrade()
    with operating(request) as who:
        task = task_get(task_id, tenant=who.tenant)
        done = task_upgrade(task_id=task.id, tenant=who.tenant, version=body.version, actor=who.actor)
    return {
        **task_out(task_get(task.id, tenant=who.tenant)),
        "from_version": done.from_version,
        "replayed": done.replayed,
    }
