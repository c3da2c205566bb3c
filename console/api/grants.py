"""Grants and decisions: list, create, narrow and revoke grants (with a preview of what a
revocation reaches), the tenant's decisions filtered, and its agents as principals.

Changing a grant is an action of a person with the right over that grant's principal
(console/access/rights.py may_change_grants): an admin's operate token changes any, an
operator's only the grants of agents they were given the right over; read tokens and
viewers are FORBIDDEN. Another tenant's grant is GRANT_NOT_FOUND (404), never 403.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from django.utils import timezone
from ninja import Path, Query, Router, Schema, Status
from pydantic import Field, StringConstraints

from console.access import agent_stewards, require_grant_change
from console.api.auth import operating, principal
from console.api.errors import refuses
from console.api.schemas import PRINTABLE, Body, Int, Moment, Page, Uuid, cursor_query, limit_query, page_of
from runtime.authz.selectors import (
    BOUNDARIES,
    GRANT_STATES,
    decisions_page,
    grant_get,
    grant_history,
    grant_page,
    grants_of,
    revocation_preview,
)
from runtime.authz.services import grant_create, grant_narrow, grant_revoke
from runtime.errors import (
    ArgumentOutOfRange,
    Forbidden,
    GrantNotFound,
    GrantNotNarrower,
    InvalidArgument,
    InvalidIdentifier,
    InvalidInput,
    InvalidResourcePattern,
    InvalidString,
    InvalidTransition,
    TaskNotFound,
)
from runtime.stops.selectors import agent_switches
from runtime.tasks.selectors import agent_list

router = Router(tags=["grants"])

GRANT_ID_MAX = 2**63 - 1
# Each names its form in the schema (runtime/authz/patterns.py), which the runtime checks
# and refuses with its own code, INVALID_IDENTIFIER or INVALID_RESOURCE_PATTERN (400), as
# it always has; a control character or a length past the column is INVALID_REQUEST here.
Principal = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, pattern=PRINTABLE),
    Field(json_schema_extra={"pattern": r"^(agent|user):[^\x00-\x1f\x7f]+$"}),
]
Action = Annotated[
    str,
    StringConstraints(min_length=1, max_length=100, pattern=PRINTABLE),
    Field(json_schema_extra={"pattern": r"^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$"}),
]
Resource = Annotated[
    str,
    StringConstraints(min_length=1, max_length=500, pattern=PRINTABLE),
    Field(json_schema_extra={"pattern": r"^[^\x00-\x1f\x7f*]*\*?$"}),
]
Reason = Annotated[str, StringConstraints(min_length=1, max_length=2000)]


def grant_id_path():
    return Path(..., ge=1, le=GRANT_ID_MAX, description="the grant's id")


class GrantOut(Schema):
    id: int
    principal: str = Field(description="agent:<name> or user:<name>")
    action: str
    resource: str = Field(description="an exact value, or a prefix pattern ending in *")
    state: Literal["live", "revoked", "expired"]
    expires_at: datetime | None
    granted_by: str
    granted_at: datetime
    narrowed_by: str
    narrowed_at: datetime | None
    revoked_by: str
    revoked_at: datetime | None
    revoke_reason: str
    revision: int = Field(description="the tenant's authz_revision its last change made")


class GrantEventOut(Schema):
    audit_id: int
    kind: str = Field(description="grant.created, grant.narrowed or grant.revoked")
    at: datetime
    actor: str
    reason: str
    affected_tasks: int | None = Field(description="the live tasks the change reached (narrow, revoke)")
    authz_revision: int


class GrantDetailOut(GrantOut):
    history: list[GrantEventOut]


class GrantIn(Body):
    principal: Principal
    action: Action
    resource: Resource
    expires_at: Moment | None = Field(None, description="with its offset; in the future; null: no expiry")


class NarrowIn(Body):
    resource: Resource | None = Field(None, description="within the grant's resource")
    expires_at: Moment | None = Field(None, description="no later than the grant's expiry")
    reason: Reason = Field(description="kept in the audit event")


class RevokeIn(Body):
    reason: Reason = Field(description="kept in the audit event")


class InFlightOut(Schema):
    effect: int
    task: uuid.UUID
    name: str
    effect_class: str
    gateway_route: str | None = Field(
        description="the credential gateway route serving it now (a stream is cut at its next chunk), or null"
    )


class TaskUnderOut(Schema):
    id: uuid.UUID
    agent: str
    status: str


class GrantPreviewOut(Schema):
    grant: GrantOut
    affected_tasks: int = Field(description="the number its grant.revoked or grant.narrowed event will record")
    tasks: list[TaskUnderOut] = Field(description="the first 1000 of them")
    in_flight: list[InFlightOut] = Field(description="their calls recorded and not yet answered")
    authz_revision: int = Field(description="the revision this preview was read at")
    limits: str


class DecisionOut(Schema):
    id: uuid.UUID
    at: datetime
    task: uuid.UUID
    parent_task: uuid.UUID | None
    epoch: int
    actor: str
    owner: str
    boundary: str
    action: str
    resource: str
    allowed: bool
    reason_code: str
    policy_version: str
    authz_revision: int


class IdentityOut(Schema):
    name: str
    principal: str = Field(description="agent:<name>, as its grants name it")
    live_grants: int
    stewards: list[str] = Field(description="operators given the right over its grants (admins have it anyway)")
    submission: Literal["open", "closed"] = Field(
        description="closed: its kill switch is on in the tenant (GET /agents/{name}/switch)"
    )


LIMITS = "effects already committed are not undone; other grants of the principal are not touched"


def grant_out(grant) -> dict:
    state = (
        "revoked"
        if grant.revoked_at
        else ("expired" if grant.expires_at and grant.expires_at <= timezone.now() else "live")
    )
    return {
        **{
            f: getattr(grant, f)
            for f in (
                "id",
                "principal",
                "action",
                "resource",
                "expires_at",
                "granted_by",
                "granted_at",
                "narrowed_by",
                "narrowed_at",
                "revoked_by",
                "revoked_at",
                "revoke_reason",
                "revision",
            )
        },
        "state": state,
    }


def event_out(event) -> dict:
    return {
        "audit_id": event.id,
        "kind": event.kind,
        "at": event.at,
        "actor": event.actor,
        "reason": event.data.get("reason", ""),
        "affected_tasks": event.data.get("affected_tasks"),
        "authz_revision": event.data.get("authz_revision", 0),
    }


def decision_out(d) -> dict:
    return {
        "id": d.id,
        "at": d.at,
        "task": d.task_id,
        "parent_task": d.parent_task,
        "epoch": d.epoch,
        "actor": d.actor,
        "owner": d.owner,
        "boundary": d.boundary,
        "action": d.action,
        "resource": d.resource,
        "allowed": d.allowed,
        "reason_code": d.reason_code,
        "policy_version": d.policy_version,
        "authz_revision": d.authz_revision,
    }


@router.get("/grants", response={200: Page[GrantOut]}, summary="The tenant's grants, filtered, newest first")
@refuses(InvalidInput, InvalidIdentifier, InvalidResourcePattern)
def list_grants(
    request,
    principal_: Principal | None = Query(None, alias="principal"),
    action: Action | None = None,
    resource: Resource | None = None,
    state: Literal[GRANT_STATES] = "live",
    cursor: str | None = cursor_query(),
    limit: Int = limit_query(),
):
    """Paged like every list (docs/api.md, Pagination). `resource` keeps the grants whose
    pattern covers it or lies within it."""
    page = grant_page(
        tenant=principal(request).tenant,
        principal=principal_,
        action=action,
        resource=resource,
        state=state,
        after=cursor,
        limit=limit,
    )
    return page_of(page, grant_out)


@router.post("/grants", response={201: GrantOut}, summary="Create a grant")
@refuses(Forbidden, InvalidIdentifier, InvalidResourcePattern, ArgumentOutOfRange)
def create_grant(request, body: GrantIn):
    with operating(request) as who:
        require_grant_change(who, body.principal)
        grant = grant_create(
            tenant=who.tenant,
            principal=body.principal,
            action=body.action,
            resource=body.resource,
            expires_at=body.expires_at,
            actor=who.actor,
        )
    return Status(201, grant_out(grant))


@router.get("/grants/{grant_id}", response={200: GrantDetailOut}, summary="One grant and its history")
@refuses(GrantNotFound)
def get_grant(request, grant_id: Int = grant_id_path()):
    grant = grant_get(grant_id=grant_id, tenant=principal(request).tenant)
    return {**grant_out(grant), "history": [event_out(e) for e in grant_history(grant)]}


@router.get(
    "/grants/{grant_id}/preview",
    response={200: GrantPreviewOut},
    summary="What narrowing or revoking the grant would reach",
)
@refuses(GrantNotFound)
def preview_grant(request, grant_id: Int = grant_id_path()):
    """The live tasks acting under the grant's principal and below them (counted by the
    same selector the revoke's audit event uses), their calls in flight, and the limits."""
    preview = revocation_preview(tenant=principal(request).tenant, grant_id=grant_id)
    return {
        "grant": grant_out(preview.grant),
        "affected_tasks": preview.count,
        "tasks": [{"id": t.id, "agent": t.agent, "status": t.status} for t in preview.tasks[:1000]],
        "in_flight": [
            {
                "effect": e.id,
                "task": e.task_id,
                "name": e.name,
                "effect_class": e.effect_class,
                "gateway_route": e.gateway_route,
            }
            for e in preview.in_flight
        ],
        "authz_revision": preview.revision,
        "limits": LIMITS,
    }


@router.post("/grants/{grant_id}/narrow", response={200: GrantOut}, summary="Narrow a grant")
@refuses(
    Forbidden,
    GrantNotFound,
    GrantNotNarrower,
    InvalidTransition,
    InvalidArgument,
    InvalidString,
    InvalidResourcePattern,
    ArgumentOutOfRange,
)
def narrow_grant(request, body: NarrowIn, grant_id: Int = grant_id_path()):
    """A resource within the old one, an expiry no later: GRANT_NOT_NARROWER otherwise."""
    with operating(request) as who:
        grant = grant_get(grant_id=grant_id, tenant=who.tenant)
        require_grant_change(who, grant.principal)
        return grant_out(
            grant_narrow(
                grant_id=grant.id,
                tenant=who.tenant,
                resource=body.resource,
                expires_at=body.expires_at,
                actor=who.actor,
                reason=body.reason,
            )
        )


@router.post("/grants/{grant_id}/revoke", response={200: GrantOut}, summary="Revoke a grant")
@refuses(Forbidden, GrantNotFound, InvalidTransition, InvalidArgument, InvalidString)
def revoke_grant(request, body: RevokeIn, grant_id: Int = grant_id_path()):
    """Every task acting under it is checked against current rows on its next action.
    Revoking it again is INVALID_TRANSITION (409)."""
    with operating(request) as who:
        grant = grant_get(grant_id=grant_id, tenant=who.tenant)
        require_grant_change(who, grant.principal)
        return grant_out(grant_revoke(grant_id=grant.id, tenant=who.tenant, actor=who.actor, reason=body.reason))


@router.get("/decisions", response={200: Page[DecisionOut]}, summary="The tenant's decisions, filtered")
@refuses(InvalidInput, TaskNotFound, InvalidIdentifier)
def list_decisions(
    request,
    task: Uuid | None = None,
    allowed: bool | None = None,
    boundary: Literal[BOUNDARIES] | None = None,
    principal_: Principal | None = Query(
        None, alias="principal", description="the acting agent:<name> or the owner user:<name>"
    ),
    cursor: str | None = cursor_query(),
    limit: Int = limit_query(),
):
    """A `task` that names no task of yours is TASK_NOT_FOUND (404)."""
    page = decisions_page(
        tenant=principal(request).tenant,
        task=task,
        allowed=allowed,
        boundary=boundary,
        principal=principal_,
        after=cursor,
        limit=limit,
    )
    return page_of(page, decision_out)


@router.get(
    "/agent-identities",
    response={200: list[IdentityOut]},
    summary="The registered agents as principals of the tenant",
)
def list_identities(request):
    who = principal(request)
    counts: dict[str, int] = {}
    for grant in grants_of(tenant=who.tenant):
        counts[grant.principal] = counts.get(grant.principal, 0) + 1
    closed = agent_switches(tenant=who.tenant)
    return [
        {
            "name": a.name,
            "principal": f"agent:{a.name}",
            "live_grants": counts.get(f"agent:{a.name}", 0),
            "stewards": agent_stewards(who, a.name),
            "submission": "closed" if a.name in closed else "open",
        }
        for a in agent_list()
    ]
