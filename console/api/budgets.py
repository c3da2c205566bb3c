"""Token budgets and service quotas of the caller's tenant (docs/api.md, "Budgets and
quotas"). Anyone in the tenant reads them; an operator changes them, each change a
conditional write when `version` is sent (VERSION_CONFLICT, 409, if it moved) and an
audit row. Capability tokens (an agent's) are not API tokens: they never reach here."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from ninja import Path, Query, Router, Schema
from pydantic import Field, StringConstraints

from console.api.auth import operating, principal
from console.api.errors import refuses
from console.api.schemas import Body, Int, JsonInt, bounded
from runtime.errors import Forbidden, InvalidString, QuotaNotFound, VersionConflict
from runtime.limits.selectors import budget_use, quota_list
from runtime.limits.services import (
    QUOTA_CALLS_MAX,
    QUOTA_WINDOW_MAX,
    SERVICE,
    TOKENS_MAX,
    VERSION_MAX,
    budget_set,
    quota_remove,
    quota_set,
)

router = Router(tags=["budgets"])

Tokens = bounded(JsonInt, ge=0, le=TOKENS_MAX)
Version = bounded(JsonInt, ge=0, le=VERSION_MAX)
Calls = bounded(JsonInt, ge=0, le=QUOTA_CALLS_MAX)
Window = bounded(JsonInt, ge=1, le=QUOTA_WINDOW_MAX)
VersionQuery = bounded(Int, ge=0, le=VERSION_MAX)
Service = Annotated[str, StringConstraints(pattern=rf"^{SERVICE.pattern}$")]  # the services' own check
Reason = Annotated[str, StringConstraints(max_length=2000)]


class UseOut(Schema):
    scope: str
    subject: str
    used: int
    limit: int | None
    state: str = Field(description="unlimited, within, near (90% or more) or exhausted")


class BudgetOut(Schema):
    tenant: str
    task_tokens: int | None
    tree_tokens: int | None
    tenant_tokens: int | None
    version: int = Field(description="0 while no budget was ever set; send it back to change conditionally")
    updated_by: str | None
    updated_at: datetime | None
    tenant_use: UseOut
    trees: list[UseOut] = Field(description="the trees that used the most")
    tasks: list[UseOut] = Field(description="the tasks that used the most")


class BudgetIn(Body):
    task_tokens: Tokens | None = None
    tree_tokens: Tokens | None = None
    tenant_tokens: Tokens | None = None
    version: Version | None = Field(None, description="the version read: the change is made only if still current")
    reason: Reason = ""

    model_config = {"extra": "forbid"}


class QuotaOut(Schema):
    service: str
    calls: int
    window_seconds: int
    version: int
    updated_by: str
    updated_at: datetime | None


class QuotaIn(Body):
    calls: Calls
    window_seconds: Window
    version: Version | None = None
    reason: Reason = ""

    model_config = {"extra": "forbid"}


def _use(u) -> dict:
    return {"scope": u.scope, "subject": u.subject, "used": u.used, "limit": u.limit, "state": u.state}


def budget_out(tenant: str) -> dict:
    use = budget_use(tenant)
    b = use.budget
    return {
        "tenant": tenant,
        "task_tokens": b and b.task_tokens,
        "tree_tokens": b and b.tree_tokens,
        "tenant_tokens": b and b.tenant_tokens,
        "version": b.version if b else 0,
        "updated_by": b and b.updated_by,
        "updated_at": b and b.updated_at,
        "tenant_use": _use(use.tenant_use),
        "trees": [_use(u) for u in use.trees],
        "tasks": [_use(u) for u in use.tasks],
    }


def quota_out(q) -> dict:
    return {
        "service": q.service,
        "calls": q.calls,
        "window_seconds": q.window_seconds,
        "version": q.version,
        "updated_by": q.updated_by,
        "updated_at": q.updated_at,
    }


@router.get("/budgets", response={200: BudgetOut}, summary="The tenant's token budgets and their use")
def get_budget(request):
    return budget_out(principal(request).tenant)


@router.put("/budgets", response={200: BudgetOut}, summary="Set the tenant's token budgets")
@refuses(Forbidden, VersionConflict, InvalidString)
def put_budget(request, body: BudgetIn):
    """Each limit is a count of model tokens (0 to 10^15), or null for none; all three are
    set. A `version` that is no longer current is VERSION_CONFLICT (409)."""
    with operating(request) as who:
        budget_set(
            tenant=who.tenant,
            actor=who.actor,
            version=body.version,
            reason=body.reason,
            task_tokens=body.task_tokens,
            tree_tokens=body.tree_tokens,
            tenant_tokens=body.tenant_tokens,
        )
    return budget_out(who.tenant)


@router.get("/quotas", response={200: list[QuotaOut]}, summary="The tenant's service quotas")
def list_quotas(request):
    return [quota_out(q) for q in quota_list(principal(request).tenant)]


@router.put("/quotas/{service}", response={200: QuotaOut}, summary="Set a service's call quota")
@refuses(Forbidden, VersionConflict, InvalidString)
def put_quota(request, body: QuotaIn, service: Service = Path(...)):
    """At most `calls` calls to /gateway/tools/<service>/ per window of `window_seconds`,
    for the whole fleet (docs/limits.md, "Quotas")."""
    with operating(request) as who:
        q = quota_set(
            tenant=who.tenant,
            service=service,
            calls=body.calls,
            window_seconds=body.window_seconds,
            actor=who.actor,
            version=body.version,
            reason=body.reason,
        )
    return quota_out(q)


@router.delete("/quotas/{service}", response={200: QuotaOut}, summary="Remove a service's quota")
@refuses(Forbidden, QuotaNotFound, VersionConflict)
def delete_quota(
    request,
    service: Service = Path(...),
    version: VersionQuery | None = Query(None, description="only if still at this version"),
):
    """The quota as it was; the service's calls are unlimited from the next one."""
    with operating(request) as who:
        return quota_out(quota_remove(tenant=who.tenant, service=service, actor=who.actor, version=version))
