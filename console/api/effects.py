"""The effect ledger: list, one effect, and resolving one whose outcome is unknown."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from ninja import Path, Router, Schema
from pydantic import Field

from console.api.auth import operating, principal
from console.api.errors import refuses
from console.api.schemas import Body, Int, Page, Uuid, cursor_query, limit_query, page_of
from runtime import states
from runtime.effects.selectors import effect_get, effect_page
from runtime.effects.services import effect_resolve
from runtime.errors import (
    EffectNotFound,
    Forbidden,
    InputTooDeep,
    InputTooLarge,
    InvalidInput,
    InvalidString,
    InvalidTransition,
    NumberOutOfRange,
    TaskNotFound,
)

router = Router(tags=["effects"])

EffectState = Literal[states.EFFECT_STATES]
EffectClass = Literal[states.EFFECT_CLASSES]
# Ledger ids are bigint; a larger number names no effect and is refused as a 422 here
# rather than overflowing in the database.
EFFECT_ID_MAX = 2**63 - 1


class EffectOut(Schema):
    id: int
    task: uuid.UUID
    step_seq: int
    name: str
    effect_class: EffectClass
    keyed: bool = Field(description="whether the target service deduplicates by our key")
    state: EffectState
    key: str
    request_digest: str
    receipt: Any
    error: Any
    attempt_epoch: int = Field(description="the attempt that last sent it")
    sends: int
    resend_approved: bool
    created_at: datetime
    settled_at: datetime | None
    resolved_by: str
    resolution_note: str


class Resolve(Body):
    outcome: Literal["committed", "failed", "retry"] = Field(
        description="committed: it happened (give its receipt); failed: it did not; retry: send it again, same key"
    )
    receipt: Any = Field(None, description="what the service answered, as JSON (committed only)")
    note: str = Field("", max_length=2000)


def effect_out(effect) -> dict:
    return {
        "id": effect.id,
        "task": effect.task_id,
        "step_seq": effect.step_seq,
        "name": effect.name,
        "effect_class": effect.effect_class,
        "keyed": effect.keyed,
        "state": effect.state,
        "key": effect.key,
        "request_digest": effect.request_digest,
        "receipt": effect.receipt,
        "error": effect.error,
        "attempt_epoch": effect.epoch,
        "sends": effect.sends,
        "resend_approved": effect.resend_approved,
        "created_at": effect.created_at,
        "settled_at": effect.settled_at,
        "resolved_by": effect.resolved_by,
        "resolution_note": effect.resolution_note,
    }


@router.get("/effects", response={200: Page[EffectOut]}, summary="The effect ledger, newest first")
@refuses(InvalidInput, TaskNotFound)
def list_effects(
    request,
    state: EffectState | None = None,
    task: Uuid | None = None,
    effect_class: EffectClass | None = None,
    cursor: str | None = cursor_query(),
    limit: Int = limit_query(),
):
    """`state=unknown` lists what waits for a person. With `task`, that task's effects by
    step; a `task` that names no task of yours is TASK_NOT_FOUND (404)."""
    page = effect_page(
        tenant=principal(request).tenant, task=task, state=state, effect_class=effect_class, after=cursor, limit=limit
    )
    return page_of(page, effect_out)


@router.get("/effects/{effect_id}", response={200: EffectOut}, summary="One effect")
@refuses(EffectNotFound)
def detail(request, effect_id: Int = Path(..., ge=1, le=EFFECT_ID_MAX)):
    return effect_out(effect_get(effect_id, tenant=principal(request).tenant))


@router.post(
    "/effects/{effect_id}/resolve",
    response={200: EffectOut},
    summary="Settle an unknown effect and unblock its task",
)
@refuses(Forbidden, EffectNotFound, InvalidTransition, InvalidString, InputTooLarge, InputTooDeep, NumberOutOfRange)
def resolve(request, body: Resolve, effect_id: Int = Path(..., ge=1, le=EFFECT_ID_MAX)):
    """Only an `unknown` effect is resolved; any other state is INVALID_TRANSITION (409),
    as is a second resolution racing the first."""
    with operating(request) as who:
        effect = effect_get(effect_id, tenant=who.tenant)  # another tenant's is not found
        return effect_out(
            effect_resolve(
                effect_id=effect.id, outcome=body.outcome, actor=who.actor, receipt=body.receipt, note=body.note
            )
        )
