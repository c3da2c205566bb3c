"""Retention and erasure of the caller's tenant (docs/api.md, "Retention and erasure").
Anyone in the tenant reads the periods and the receipts; an operator changes the periods,
previews an erasure and runs it. A subject is always the caller's tenant's: another
tenant's task is TASK_NOT_FOUND, like a missing one."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from ninja import Path, Router, Schema, Status
from pydantic import Field, StringConstraints

from console.api.auth import operating, principal
from console.api.errors import refuses
from console.api.schemas import Body, JsonInt, bounded
from runtime.errors import (
    ArgumentOutOfRange,
    ErasureReceiptNotFound,
    ErasureSubjectLive,
    Forbidden,
    InvalidArgument,
    InvalidIdentifier,
    InvalidString,
    TaskNotFound,
)
from runtime.lifecycle.selectors import MAX_DAYS, receipt_check, receipt_get, receipt_page, retention_get
from runtime.lifecycle.selectors import erasure_preview as preview_of
from runtime.lifecycle.services import Subject, erasure_run, retention_set

router = Router(tags=["lifecycle"])

Days = bounded(JsonInt, ge=1, le=MAX_DAYS)
Reason = Annotated[str, StringConstraints(max_length=2000)]
Value = Annotated[str, StringConstraints(max_length=200)]


class RetentionOut(Schema):
    tenant: str
    task_days: int | None
    gateway_days: int | None
    memory_days: int | None
    decision_days: int | None
    audit_days: int | None = Field(description="the audit trail's period: at least every other one")
    version: int = Field(description="0 while never set")


class RetentionIn(Body):
    task_days: Days | None = None
    gateway_days: Days | None = None
    memory_days: Days | None = None
    decision_days: Days | None = None
    audit_days: Days | None = None
    reason: Reason = ""

    model_config = {"extra": "forbid"}


class SubjectIn(Body):
    kind: Literal["task", "owner", "agent", "tenant"]
    value: Value = Field(
        "", description="the task id, the owner (actor), or the agent (its memory); empty for the tenant"
    )

    model_config = {"extra": "forbid"}


class ErasureIn(SubjectIn):
    reason: Reason


class PreviewOut(Schema):
    kind: str
    value: str
    tasks: int
    rows: int
    places: dict[str, int]
    redis_keys: list[str]
    exports: list[str]


class ReceiptOut(Schema):
    id: uuid.UUID
    subject_kind: str
    subject: str
    actor: str
    reason: str
    created_at: datetime
    rows: int
    body: dict = Field(description="what the signature covers: places (rows, hashes), Redis keys, exports")
    key_id: str
    mac: str = Field(description="HMAC-SHA256 of the body, hex")
    verified: bool | None = Field(None, description="the signature and the tombstones checked (detail only)")
    problems: list[str] = []


def _subject(tenant: str, body: SubjectIn) -> Subject:
    return Subject.of(kind=body.kind, tenant=tenant, value=body.value or None)


def _receipt(r, *, check: bool = False) -> dict:
    out = {
        "id": r.id,
        "subject_kind": r.subject_kind,
        "subject": r.subject,
        "actor": r.actor,
        "reason": r.reason,
        "created_at": r.created_at,
        "rows": r.rows,
        "body": r.body,
        "key_id": r.key_id,
        "mac": bytes(r.mac).hex(),
    }
    if check:
        problems = receipt_check(r)
        out.update(verified=not problems, problems=problems)
    return out


@router.get("/retention", response={200: RetentionOut}, summary="The tenant's retention periods")
def get_retention(request):
    tenant = principal(request).tenant
    return {"tenant": tenant, **retention_get(tenant=tenant)}


@router.put("/retention", response={200: RetentionOut}, summary="Set the tenant's retention periods")
@refuses(Forbidden, InvalidArgument, ArgumentOutOfRange, InvalidString)
def put_retention(request, body: RetentionIn):
    """Every period, in days (null: kept); `audit_days` at least every other one
    (INVALID_ARGUMENT otherwise). Audited `retention.set`."""
    with operating(request) as who:
        periods = body.dict(exclude={"reason"})
        retention_set(tenant=who.tenant, actor=who.actor, reason=body.reason, **periods)
    return {"tenant": who.tenant, **retention_get(tenant=who.tenant)}


@router.post("/erasures/preview", response={200: PreviewOut}, summary="What an erasure would erase")
@refuses(Forbidden, TaskNotFound, ErasureSubjectLive, InvalidIdentifier, InvalidArgument)
def preview(request, body: SubjectIn):
    with operating(request) as who:
        p = preview_of(subject=_subject(who.tenant, body))
    return {
        "kind": p.subject.kind,
        "value": p.subject.value,
        "tasks": p.tasks,
        "rows": p.rows,
        "places": p.places,
        "redis_keys": p.redis,
        "exports": p.exports,
    }


@router.post("/erasures", response={201: ReceiptOut}, summary="Erase a subject's payloads; the signed receipt")
@refuses(Forbidden, TaskNotFound, ErasureSubjectLive, InvalidIdentifier, InvalidArgument, InvalidString)
def erase(request, body: ErasureIn):
    """Tombstones every place's rows of the subject's tasks (all finished: ERASURE_SUBJECT_LIVE
    otherwise), deletes its Redis keys, and answers the receipt. Audited `erasure.completed`."""
    with operating(request) as who:
        receipt = erasure_run(subject=_subject(who.tenant, body), actor=who.actor, reason=body.reason)
    return Status(201, _receipt(receipt))


@router.get("/erasures", response={200: list[ReceiptOut]}, summary="The tenant's erasure receipts, newest first")
def receipts(request):
    return [_receipt(r) for r in receipt_page(tenant=principal(request).tenant)]


@router.get("/erasures/{receipt_id}", response={200: ReceiptOut}, summary="One erasure receipt, checked")
@refuses(ErasureReceiptNotFound)
def receipt(request, receipt_id: uuid.UUID = Path(...)):
    return _receipt(receipt_get(tenant=principal(request).tenant, receipt_id=receipt_id), check=True)
