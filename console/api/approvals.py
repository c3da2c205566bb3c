"""Approvals: the inbox (list), one request, and a person's approve or deny.

An approval is decided by a person only: an operator's session or an operator API token.
A capability token (what an agent holds) is no API credential at all (AUTH_REQUIRED), a
viewer or a read token is FORBIDDEN, and the runtime refuses the person who started the
task (SELF_APPROVAL_REFUSED) and any second decision (APPROVAL_ALREADY_DECIDED). An approve
of a request whose authz_revision, policy_version or input digest changed since the agent
asked is APPROVAL_STALE (409, `details.changed`: each one's before and after), and the
request is then stale."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Query, Router, Schema
from pydantic import Field, StringConstraints

from console.access import require_approval_right
from console.api.auth import operating, principal
from console.api.errors import refuses
from console.api.schemas import Body, Int, Name
from runtime import states
from runtime.approvals.selectors import approval_get, approvals_list
from runtime.approvals.services import approval_decide
from runtime.errors import (
    ApprovalAlreadyDecided,
    ApprovalNotFound,
    ApprovalStale,
    Forbidden,
    InvalidString,
    InvalidTransition,
    SelfApprovalRefused,
)

router = Router(tags=["approvals"])

ApprovalState = Literal[states.APPROVAL_STATES]
# Any text names an approval or none (APPROVAL_NOT_FOUND), but a "/" would be read as the
# path's next segment: another route.
ApprovalId = Annotated[str, StringConstraints(pattern=r"^[^/]+$")]


class ApprovalOut(Schema):
    id: uuid.UUID
    task: uuid.UUID
    seq: int = Field(description="the request's step seq in the task's journal")
    name: str
    agent: str
    owner: str = Field(description="the person who started the task (who may not approve it)")
    action: Any = Field(description="the canonical action, as the person approves it")
    action_hash: str
    effect_class: Literal[states.EFFECT_CLASSES]
    context: dict = Field(
        description="what the context digest covers: input digest, precondition, policy_version, authz_revision"
    )
    context_digest: str
    untrusted: bool = Field(description="whether the action holds text from a model's or a tool's reply")
    untrusted_paths: list[str]
    untrusted_steps: int = Field(
        description="the task's steps before the request that read a model's or a "
        "tool's reply (the action may derive from them)"
    )
    requested_at: datetime
    expires_at: datetime
    state: ApprovalState
    decided_by: str | None
    decided_at: datetime | None
    comment: str
    stale_reason: str


class Decide(Body):
    comment: str = Field("", max_length=2000)


def approval_out(a) -> dict:
    return {
        "id": a.id,
        "task": a.task_id,
        "seq": a.seq,
        "name": a.name,
        "agent": a.agent,
        "owner": a.owner,
        "action": a.action,
        "action_hash": a.action_hash,
        "effect_class": a.effect_class,
        "context": a.context,
        "context_digest": a.context_digest,
        "untrusted": a.untrusted,
        "untrusted_paths": a.untrusted_paths,
        "untrusted_steps": a.untrusted_steps,
        "requested_at": a.requested_at,
        "expires_at": a.expires_at,
        "state": a.state,
        "decided_by": a.decided_by,
        "decided_at": a.decided_at,
        "comment": a.comment,
        "stale_reason": a.stale_reason,
    }


@router.get("/approvals", response={200: list[ApprovalOut]}, summary="Approval requests")
def list_approvals(
    request,
    state: ApprovalState | Literal["any"] = states.PENDING,
    agent: Name | None = None,
    order: Literal["newest", "expiry"] = "newest",
    limit: Int = Query(100, ge=1, le=500),
):
    """Pending by default, newest first; `order=expiry` puts the soonest to expire first.
    `state=any`: every state, as in the console."""
    rows = approvals_list(
        tenant=principal(request).tenant, state=None if state == "any" else state, agent=agent, order=order, limit=limit
    )
    return [approval_out(a) for a in rows]


@router.get("/approvals/{approval_id}", response={200: ApprovalOut}, summary="One approval request")
@refuses(ApprovalNotFound)
def detail(request, approval_id: ApprovalId):
    return approval_out(approval_get(approval_id=approval_id, tenant=principal(request).tenant))


def _decide(request, approval_id: str, body: Decide, decision: str) -> dict:
    with operating(request) as who:
        require_approval_right(who, approval_get(approval_id=approval_id, tenant=who.tenant).agent)
        return approval_out(
            approval_decide(
                approval_id=approval_id, tenant=who.tenant, actor=who.actor, decision=decision, comment=body.comment
            )
        )


@router.post(
    "/approvals/{approval_id}/approve",
    response={200: ApprovalOut},
    summary="Approve a pending request (once) and re-queue its task; 409 APPROVAL_STALE if it went stale",
)
@refuses(
    Forbidden,
    ApprovalNotFound,
    ApprovalAlreadyDecided,
    ApprovalStale,
    SelfApprovalRefused,
    InvalidTransition,
    InvalidString,
)
def approve(request, approval_id: ApprovalId, body: Decide):
    return _decide(request, approval_id, body, "approve")


@router.post(
    "/approvals/{approval_id}/deny",
    response={200: ApprovalOut},
    summary="Deny a pending request (once) and re-queue its task to run its denial branch",
)
@refuses(Forbidden, ApprovalNotFound, ApprovalAlreadyDecided, InvalidTransition, InvalidString)
def deny(request, approval_id: ApprovalId, body: Decide):
    return _decide(request, approval_id, body, "deny")
