"""Triggers: cron schedules, signed webhooks and dependency triggers (runtime/triggers/).
Members of the tenant read them; operators make, pause and resume them. Another
tenant's schedule or webhook is not found (404). A webhook's secret is in the answer
that creates it, and never again."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from ninja import Router, Schema, Status
from pydantic import Field, StrictBool

from console.api.auth import operating, principal
from console.api.errors import refuses
from console.api.schemas import Body, Name, PoolName, Uuid
from runtime.errors import (
    Forbidden,
    InputTooDeep,
    InputTooLarge,
    InvalidArgument,
    InvalidCron,
    InvalidIdentifier,
    InvalidInput,
    InvalidString,
    InvalidTimezone,
    InvalidTransition,
    NumberOutOfRange,
    ScheduleNotFound,
    TriggerNotFound,
    UnknownAgent,
    WebhookNotFound,
)
from runtime.triggers.selectors import (
    dependency_get,
    dependency_list,
    schedule_get,
    schedule_list,
    schedule_upcoming,
    webhook_deliveries,
    webhook_get,
    webhook_list,
)
from runtime.triggers.services import (
    PREREQUISITES_MAX,
    dependency_create,
    schedule_create,
    schedule_pause,
    schedule_resume,
    webhook_create,
    webhook_pause,
    webhook_resume,
)

router = Router(tags=["triggers"])


class ScheduleOut(Schema):
    id: uuid.UUID
    name: str
    agent: str
    input: dict
    owner: str
    pool: str | None
    cron: str
    timezone: str
    missed_policy: str
    overlap_policy: str
    paused: bool
    next_fire_at: datetime | None
    next_runs: list[datetime] = Field(description="the next five ticks, in UTC")
    last_tick_at: datetime | None
    last_task_id: uuid.UUID | None
    created_by: str
    created_at: datetime


# What submitting a task refuses of an agent, its input and its pool (runtime/triggers/target.py).
TARGET = (UnknownAgent, InvalidIdentifier, InvalidInput, InputTooLarge, InputTooDeep, NumberOutOfRange, InvalidString)


class ScheduleIn(Body):
    name: str = Field(min_length=1, max_length=100)
    agent: Name
    input: dict = Field(default_factory=dict)
    cron: str = Field(description="five fields: minute hour day-of-month month day-of-week")
    timezone: str = Field("UTC", description="an IANA name such as Europe/Paris")
    missed_policy: Literal["skip", "catch_up"] = "skip"
    overlap_policy: Literal["skip", "queue", "stop"] = "skip"
    pool: PoolName | None = None
    paused: StrictBool = False


class WebhookOut(Schema):
    id: uuid.UUID
    name: str
    agent: str
    owner: str
    pool: str | None
    paused: bool
    url: str
    created_by: str
    created_at: datetime


class WebhookCreated(WebhookOut):
    secret: str = Field(description="shown once: sign timestamp + '.' + body with HMAC-SHA256 under it")


class WebhookIn(Body):
    name: str = Field(min_length=1, max_length=100)
    agent: Name
    pool: PoolName | None = None


class DeliveryOut(Schema):
    delivery_id: str
    received_at: datetime
    body_sha256: str
    task_id: uuid.UUID | None


class DependencyIn(Body):
    agent: Name
    input: dict = Field(default_factory=dict)
    prerequisites: list[Uuid] = Field(
        min_length=1, max_length=PREREQUISITES_MAX, description="task ids; the task starts once all completed"
    )
    on_failure: Literal["skip", "run", "fail"] = "skip"
    pool: PoolName | None = None


class DependencyOut(Schema):
    id: uuid.UUID
    agent: str
    prerequisites: list[str]
    on_failure: str
    state: str
    reason: str
    task_id: uuid.UUID | None
    created_by: str
    created_at: datetime
    settled_at: datetime | None


class Changed(Schema):
    changed: bool = Field(description="False: it was already in that state")


def schedule_out(s) -> dict:
    return {
        **{
            f: getattr(s, f)
            for f in (
                "id",
                "name",
                "agent",
                "input",
                "owner",
                "pool",
                "cron",
                "timezone",
                "missed_policy",
                "overlap_policy",
                "paused",
                "next_fire_at",
                "last_tick_at",
                "last_task_id",
                "created_by",
                "created_at",
            )
        },
        "next_runs": schedule_upcoming(s),
    }


def webhook_out(w) -> dict:
    return {
        **{f: getattr(w, f) for f in ("id", "name", "agent", "owner", "pool", "paused", "created_by", "created_at")},
        "url": f"/hooks/{w.id}",
    }


def dependency_out(d) -> dict:
    return {
        f: getattr(d, f)
        for f in (
            "id",
            "agent",
            "prerequisites",
            "on_failure",
            "state",
            "reason",
            "task_id",
            "created_by",
            "created_at",
            "settled_at",
        )
    }


@router.get("/schedules", response={200: list[ScheduleOut]}, summary="Cron schedules, by name")
def list_schedules(request, paused: bool | None = None, agent: Name | None = None):
    return [schedule_out(s) for s in schedule_list(tenant=principal(request).tenant, paused=paused, agent=agent)]


@router.post("/schedules", response={201: ScheduleOut}, summary="Make a cron schedule")
@refuses(Forbidden, *TARGET, InvalidCron, InvalidTimezone, InvalidTransition)
def create_schedule(request, body: ScheduleIn):
    """A bad cron expression is INVALID_CRON, an unknown zone INVALID_TIMEZONE (400)."""
    with operating(request) as who:
        made = schedule_create(tenant=who.tenant, owner=who.actor, actor=who.actor, **body.dict())
    return Status(201, schedule_out(made))


@router.get("/schedules/{schedule_id}", response={200: ScheduleOut}, summary="A schedule and its next runs")
@refuses(ScheduleNotFound)
def get_schedule(request, schedule_id: Uuid):
    return schedule_out(schedule_get(schedule_id, tenant=principal(request).tenant))


@router.post("/schedules/{schedule_id}/pause", response={200: Changed}, summary="Pause a schedule")
@refuses(Forbidden, ScheduleNotFound)
def pause_schedule(request, schedule_id: Uuid):
    with operating(request) as who:
        return {"changed": schedule_pause(schedule_id=schedule_id, actor=who.actor, tenant=who.tenant)}


@router.post(
    "/schedules/{schedule_id}/resume",
    response={200: Changed},
    summary="Resume a schedule from its next tick after now",
)
@refuses(Forbidden, ScheduleNotFound)
def resume_schedule(request, schedule_id: Uuid):
    with operating(request) as who:
        return {"changed": schedule_resume(schedule_id=schedule_id, actor=who.actor, tenant=who.tenant)}


@router.get("/webhooks", response={200: list[WebhookOut]}, summary="Signed webhooks, by name")
def list_webhooks(request, paused: bool | None = None):
    return [webhook_out(w) for w in webhook_list(tenant=principal(request).tenant, paused=paused)]


@router.post("/webhooks", response={201: WebhookCreated}, summary="Make a signed webhook")
@refuses(Forbidden, UnknownAgent, InvalidIdentifier, InvalidTransition)
def create_webhook(request, body: WebhookIn):
    with operating(request) as who:
        made, secret = webhook_create(tenant=who.tenant, owner=who.actor, actor=who.actor, **body.dict())
    return Status(201, {**webhook_out(made), "secret": secret})


@router.get("/webhooks/{webhook_id}", response={200: WebhookOut}, summary="A webhook")
@refuses(WebhookNotFound)
def get_webhook(request, webhook_id: Uuid):
    return webhook_out(webhook_get(webhook_id, tenant=principal(request).tenant))


@router.get(
    "/webhooks/{webhook_id}/deliveries",
    response={200: list[DeliveryOut]},
    summary="A webhook's recent accepted deliveries, newest first",
)
@refuses(WebhookNotFound)
def list_deliveries(request, webhook_id: Uuid):
    hook = webhook_get(webhook_id, tenant=principal(request).tenant)
    return [
        {"delivery_id": d.delivery_id, "received_at": d.received_at, "body_sha256": d.body_digest, "task_id": d.task_id}
        for d in webhook_deliveries(hook)
    ]


@router.post("/webhooks/{webhook_id}/pause", response={200: Changed}, summary="Pause a webhook")
@refuses(Forbidden, WebhookNotFound)
def pause_webhook(request, webhook_id: Uuid):
    with operating(request) as who:
        return {"changed": webhook_pause(webhook_id=webhook_id, actor=who.actor, tenant=who.tenant)}


@router.post("/webhooks/{webhook_id}/resume", response={200: Changed}, summary="Resume a webhook")
@refuses(Forbidden, WebhookNotFound)
def resume_webhook(request, webhook_id: Uuid):
    with operating(request) as who:
        return {"changed": webhook_resume(webhook_id=webhook_id, actor=who.actor, tenant=who.tenant)}


@router.get("/dependencies", response={200: list[DependencyOut]}, summary="Dependency triggers, newest first")
def list_dependencies(request, state: Literal["waiting", "fired", "skipped", "failed"] | None = None):
    return [dependency_out(d) for d in dependency_list(tenant=principal(request).tenant, state=state)]


@router.post("/dependencies", response={201: DependencyOut}, summary="Start a task once the tasks it names completed")
@refuses(Forbidden, *TARGET, InvalidArgument)
def create_dependency(request, body: DependencyIn):
    with operating(request) as who:
        made = dependency_create(tenant=who.tenant, owner=who.actor, actor=who.actor, **body.dict())
    return Status(201, dependency_out(made))


@router.get("/dependencies/{trigger_id}", response={200: DependencyOut}, summary="A dependency trigger")
@refuses(TriggerNotFound)
def get_dependency(request, trigger_id: Uuid):
    return dependency_out(dependency_get(trigger_id, tenant=principal(request).tenant))
