"""Stops: stop a task and its live descendants (with a reason; `cancel` is the same
route under its old name), preview what a stop covers, read a stop's summary, make a
new run of a cancelled task, and the agent kill switch.

Every action is an operator's (console/api/auth.py operating): a viewer or a read
token is FORBIDDEN. Another tenant's task is TASK_NOT_FOUND and its stop
STOP_NOT_FOUND (404), never 403. The summary's lists are capped; each says how many
it left off (`more`).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Router, Schema, Status
from pydantic import Field, StringConstraints

from console.api.auth import operating, principal
from console.api.effects import EffectOut, effect_out
from console.api.errors import refuses
from console.api.schemas import Body, PathName, Uuid
from runtime import states
from runtime.errors import (
    AgentStopped,
    Forbidden,
    InvalidArgument,
    InvalidString,
    InvalidTransition,
    QueueFull,
    StopNotFound,
    TaskNotFound,
    UnknownAgent,
)
from runtime.stops.selectors import (
    ROW_STATES,
    agent_stop_preview,
    agent_switch,
    stop_preview,
    stop_summary,
)
from runtime.stops.services import agent_reopen, agent_stop, task_rerun, task_stop
from runtime.tasks.selectors import agent_get, task_get

router = Router(tags=["stops"])

# Required and not blank: it is the audit trail's answer to "why was this stopped?".
Reason = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")]


class StopIn(Body):
    reason: Reason = Field(description="why; kept in the stop and its audit events")


class StopStartedOut(Schema):
    stop_id: Uuid
    tasks: list[uuid.UUID] = Field(description="every task the stop covers: the task and its live descendants")
    cancelled: list[uuid.UUID] = Field(description="those cancelled at once (nothing of theirs was running)")
    stopping: list[uuid.UUID] = Field(description="those waiting for a boundary's acknowledgment")


class StopOut(Schema):
    id: uuid.UUID
    task: uuid.UUID | None = Field(description="the task it was requested on; null for an agent's kill switch")
    agent: str | None = Field(description="the agent whose kill switch made it; null for a task's stop")
    actor: str
    reason: str
    requested_at: datetime
    bound_seconds: float = Field(description="how long each level of the tree waits for its boundaries")
    finished_at: datetime | None = Field(description="when its last task was cancelled; null while stopping")
    outcome: Literal["acknowledged", "bounded"] | None = Field(
        description="acknowledged: every boundary answered; bounded: a bound passed first"
    )
    state: Literal["stopping", "cancelled", "cancelled at its bound", "nothing was live"]


class BoundaryOut(Schema):
    boundary: Literal[states.STOP_BOUNDARIES]
    state: Literal[ROW_STATES] = Field(
        description="acknowledged; waiting (the task is still stopping); missing "
        "(cancelled at its bound without it); late (after that)"
    )
    at: datetime | None
    by: str = Field(description="the process or service that acknowledged")
    detail: dict[str, Any] = Field(description="what it reported")


class TaskStopOut(Schema):
    id: uuid.UUID
    agent: str
    status: str = Field(description="now")
    parent: uuid.UUID | None
    deadline: datetime | None = Field(description="when the stop stops waiting for it; null once it left the stop")
    bound_passed: bool
    cancelled_at: datetime | None
    left: bool = Field(description="it is under this stop no more (resumed, or stopped again since)")
    boundaries: list[BoundaryOut]


class CallOut(Schema):
    id: uuid.UUID
    task: uuid.UUID
    route: str
    action: str
    resource: str
    outcome: Literal["admitted", "partial"] = Field(
        description="admitted: no answer recorded (in flight, or unresolved); partial: cut part-way"
    )
    started_at: datetime
    finished_at: datetime | None


class EffectsOut(Schema):
    items: list[EffectOut]
    more: int = Field(description="how many more there are beyond these")


class CallsOut(Schema):
    items: list[CallOut]
    more: int


class SummaryOut(Schema):
    stop: StopOut
    read_at: datetime
    task_count: int
    stopping: int = Field(description="of its tasks, still waiting")
    acks: int = Field(description="acknowledgments recorded, over every task (four each when complete)")
    complete: bool = Field(description="every boundary of every task acknowledged")
    counts: dict[str, int] = Field(description="the rows below by state")
    tasks: list[TaskStopOut] = Field(description="the first 200 of its tasks, in id order (parents first)")
    tasks_more: int
    last_ack_at: datetime | None
    to_last_ack_ms: float | None = Field(description="from the request to the last acknowledgment so far")
    committed_before: EffectsOut = Field(description="effects of its tasks committed before the request")
    in_flight: EffectsOut = Field(description="effects with no known outcome: intent, partial or unknown")
    settled_since: EffectsOut = Field(description="effects that settled (committed or failed) after the request")
    calls: CallsOut = Field(description="gateway calls unanswered or cut part-way")
    unresolved: list[str] = Field(description="what the stop leaves open, in words")


class TaskBrief(Schema):
    id: uuid.UUID
    agent: str
    status: str
    parent: uuid.UUID | None


class StopPreviewOut(Schema):
    count: int = Field(description="how many tasks the stop would move to stopping")
    tasks: list[TaskBrief] = Field(description="the first 200 of them")
    tasks_more: int
    already_stopping: list[TaskBrief] = Field(description="live tasks of the tree stopping under an earlier stop")
    in_flight: EffectsOut
    calls: CallsOut = Field(description="their gateway calls in flight now: the gateway cuts them")
    limits: str


class RerunIn(Body):
    reason: Reason


class RerunOut(Schema):
    id: uuid.UUID = Field(description="the new task")
    rerun_of: uuid.UUID


class SwitchOut(Schema):
    agent: str
    submission: Literal["open", "closed"]
    changed_by: str
    changed_at: datetime | None
    reason: str
    stop_id: Uuid | None = Field(description="the stop that closed it")


class ReopenOut(SwitchOut):
    changed: bool = Field(description="false: it was open already")


def started_out(started) -> dict:
    return {
        "stop_id": started.stop_id,
        "tasks": started.tasks,
        "cancelled": started.cancelled,
        "stopping": started.stopping,
    }


def stop_out(summary) -> dict:
    stop = summary.stop
    return {
        "id": stop.id,
        "task": stop.task_id,
        "agent": stop.agent,
        "actor": stop.actor,
        "reason": stop.reason,
        "requested_at": stop.requested_at,
        "bound_seconds": stop.bound_seconds,
        "finished_at": stop.finished_at,
        "outcome": stop.outcome,
        "state": summary.outcome_words,
    }


def call_out(call) -> dict:
    return {
        "id": call.id,
        "task": call.task_id,
        "route": call.route,
        "action": call.action,
        "resource": call.resource,
        "outcome": call.outcome,
        "started_at": call.started_at,
        "finished_at": call.finished_at,
    }


def brief_out(task) -> dict:
    return {"id": task.id, "agent": task.agent, "status": task.status, "parent": task.parent_id}


def summary_out(summary) -> dict:
    last = summary.to_last_ack
    return {
        "stop": stop_out(summary),
        "read_at": summary.read_at,
        "task_count": summary.task_count,
        "stopping": summary.stopping,
        "acks": summary.acks,
        "complete": summary.complete,
        "counts": summary.counts,
        "tasks": [
            {
                "id": t.task.id,
                "agent": t.task.agent,
                "status": t.task.status,
                "parent": t.task.parent_id,
                "deadline": t.deadline,
                "bound_passed": t.bound_passed,
                "cancelled_at": t.cancelled_at,
                "left": t.left,
                "boundaries": [
                    {"boundary": r.boundary, "state": r.state, "at": r.at, "by": r.by, "detail": r.detail}
                    for r in t.rows
                ],
            }
            for t in summary.tasks
        ],
        "tasks_more": summary.tasks_more,
        "last_ack_at": summary.last_ack_at,
        "to_last_ack_ms": round(last.total_seconds() * 1000, 3) if last is not None else None,
        "committed_before": effects_out(summary.committed_before),
        "in_flight": effects_out(summary.in_flight),
        "settled_since": effects_out(summary.settled_since),
        "calls": {"items": [call_out(c) for c in summary.calls], "more": summary.calls.more},
        "unresolved": summary.unresolved,
    }


def effects_out(capped) -> dict:
    return {"items": [effect_out(e) for e in capped], "more": capped.more}


def preview_out(preview) -> dict:
    return {
        "count": preview.count,
        "tasks": [brief_out(t) for t in preview.tasks],
        "tasks_more": preview.tasks.more,
        "already_stopping": [brief_out(t) for t in preview.already_stopping],
        "in_flight": effects_out(preview.in_flight),
        "calls": {"items": [call_out(c) for c in preview.calls], "more": preview.calls.more},
        "limits": preview.limits,
    }


def switch_out(state) -> dict:
    return {
        "agent": state.agent,
        "submission": "closed" if state.closed else "open",
        "changed_by": state.changed_by,
        "changed_at": state.changed_at,
        "reason": state.reason,
        "stop_id": state.stop_id,
    }


def _stop(request, task_id, body: StopIn) -> dict:
    with operating(request) as who:
        task = task_get(task_id, tenant=who.tenant)
        return started_out(task_stop(task_id=task.id, actor=who.actor, reason=body.reason))


@router.post("/tasks/{task_id}/stop", response={200: StopStartedOut}, summary="Stop a task and its live descendants")
@refuses(Forbidden, TaskNotFound, InvalidTransition, InvalidArgument, InvalidString)
def stop(request, task_id: Uuid, body: StopIn):
    """Every live task of the tree moves to `stopping` in one transaction, which closes
    its admission at every boundary; each becomes `cancelled` once its four boundaries
    acknowledged (children first), or once its bound passed. Read how it goes at
    GET /tasks/{id}/stop-summary. A finished task, or one already stopping, is
    INVALID_TRANSITION (409); a blank reason is INVALID_REQUEST (422)."""
    return _stop(request, task_id, body)


@router.post("/tasks/{task_id}/cancel", response={200: StopStartedOut}, summary="The same as /stop (its former name)")
@refuses(Forbidden, TaskNotFound, InvalidTransition, InvalidArgument, InvalidString)
def cancel(request, task_id: Uuid, body: StopIn):
    """POST /tasks/{id}/stop under its former name: the same stop, the same answer, and
    a reason is required here too."""
    return _stop(request, task_id, body)


@router.get(
    "/tasks/{task_id}/stop-preview", response={200: StopPreviewOut}, summary="What stopping the task would cover"
)
@refuses(TaskNotFound)
def preview(request, task_id: Uuid):
    """The live tasks of its tree a stop would move to stopping, their effects with no
    outcome yet and their gateway calls in flight, read now."""
    return preview_out(stop_preview(task_id=task_id, tenant=principal(request).tenant))


@router.get(
    "/tasks/{task_id}/stop-summary",
    response={200: SummaryOut},
    summary="The task's latest stop, boundary by boundary",
)
@refuses(TaskNotFound, StopNotFound)
def task_summary(request, task_id: Uuid):
    """STOP_NOT_FOUND (404) if the task was never stopped."""
    return summary_out(stop_summary(task_id=task_id, tenant=principal(request).tenant))


@router.get("/stops/{stop_id}", response={200: SummaryOut}, summary="One stop, boundary by boundary")
@refuses(StopNotFound)
def get_stop(request, stop_id: Uuid):
    return summary_out(stop_summary(stop_id=stop_id, tenant=principal(request).tenant))


@router.post("/tasks/{task_id}/rerun", response={201: RerunOut}, summary="A new run of a cancelled task")
@refuses(Forbidden, TaskNotFound, InvalidTransition, AgentStopped, QueueFull, InvalidArgument, InvalidString)
def rerun(request, task_id: Uuid, body: RerunIn):
    """A new task (new id, same agent, input, owner and pool, no caller key) whose
    `rerun_of` names the old one; nothing of the old run carries over. Only a cancelled
    root task: anything else is INVALID_TRANSITION (409); a stopped agent AGENT_STOPPED."""
    with operating(request) as who:
        task = task_get(task_id, tenant=who.tenant)
        made = task_rerun(task_id=task.id, actor=who.actor, reason=body.reason)
    return Status(201, {"id": made, "rerun_of": task.id})


@router.get(
    "/agents/{name}/switch",
    response={200: SwitchOut},
    summary="Whether the agent's submission is open in the tenant",
)
@refuses(UnknownAgent)
def switch(request, name: PathName):
    info = agent_get(name)
    return switch_out(agent_switch(tenant=principal(request).tenant, agent=info.name))


@router.get(
    "/agents/{name}/stop-preview",
    response={200: StopPreviewOut},
    summary="What the agent's kill switch would stop",
)
@refuses(UnknownAgent)
def agent_preview(request, name: PathName):
    info = agent_get(name)
    return preview_out(agent_stop_preview(tenant=principal(request).tenant, agent=info.name))


@router.post(
    "/agents/{name}/stop",
    response={200: StopStartedOut},
    summary="The kill switch: close submission and stop every live task of the agent",
)
@refuses(UnknownAgent, Forbidden, InvalidArgument, InvalidString)
def stop_agent(request, name: PathName, body: StopIn):
    """In the token's tenant: from its commit no task of the agent is admitted
    (AGENT_STOPPED, 409, on submit) until POST /agents/{name}/reopen, and every live
    task of it, with its descendants, is stopped under one stop. With none live, the
    stop covers no task and is over at once."""
    info = agent_get(name)
    with operating(request) as who:
        return started_out(agent_stop(tenant=who.tenant, agent=info.name, actor=who.actor, reason=body.reason))


@router.post("/agents/{name}/reopen", response={200: ReopenOut}, summary="Open the agent's submission again")
@refuses(UnknownAgent, Forbidden, InvalidString)
def reopen_agent(request, name: PathName, body: StopIn):
    """Tasks the kill switch cancelled stay cancelled (resume or rerun them one by one)."""
    info = agent_get(name)
    with operating(request) as who:
        changed = agent_reopen(tenant=who.tenant, agent=info.name, actor=who.actor, reason=body.reason)
        return {**switch_out(agent_switch(tenant=who.tenant, agent=info.name)), "changed": changed}
