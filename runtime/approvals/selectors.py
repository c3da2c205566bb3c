"""Reads for the inbox, the API, the CLI and the task page."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Q
from django.db.models.functions import Now

from runtime import arguments, states
from runtime.approvals.services import _approval_id
from runtime.audit import AuditKind, chain_of
from runtime.errors import ApprovalNotFound, InvalidInput
from runtime.models import Approval, AuditEvent

ORDERS = {"newest": ("-id",), "expiry": ("expires_at", "id")}
SOON_SECONDS = 3600  # "about to expire" on the dashboard: within the hour


def approval_get(*, approval_id, tenant: str) -> Approval:
    approval = Approval.objects.filter(id=_approval_id(approval_id), tenant=arguments.tenant(tenant)).first()
    if approval is None:
        raise ApprovalNotFound(f"no approval {approval_id} in tenant {tenant}", approval_id=str(approval_id))
    return approval


def approvals_list(
    *,
    tenant: str,
    state: str | None = states.PENDING,
    agent: str | None = None,
    order: str = "newest",
    limit: int = 100,
    agents: list[str] | None = None,
) -> list[Approval]:
    """The tenant's approvals, pending by default: newest first or soonest to expire.
    `agents`: only those agents' requests (the caller's per-agent rights), None for all."""
    if state is not None and state not in states.APPROVAL_STATES:
        raise InvalidInput(f"state must be one of {', '.join(states.APPROVAL_STATES)}", field="state")
    if order not in ORDERS:
        raise InvalidInput(f"order must be one of {', '.join(ORDERS)}", field="order")
    if not isinstance(limit, int) or not 1 <= limit <= 500:
        raise InvalidInput("limit is 1 to 500", field="limit")
    rows = Approval.objects.filter(tenant=arguments.tenant(tenant))
    if state is not None:
        rows = rows.filter(state=state)
    if agent is not None:
        rows = rows.filter(agent=agent)
    if agents is not None:
        rows = rows.filter(agent__in=agents)
    return list(rows.order_by(*ORDERS[order])[:limit])


def approval_changes(*, approval: Approval) -> dict:
    """What a stale package went stale against: each part of its context that changed,
    {key: {"before", "after"}}, as its approval.stale audit row holds it (written by the
    approve that found it, with the APPROVAL_STALE it raised, or by the executor's
    re-check); {} for any other state, or a stale reason that names no such part. Read
    from the task's chain (audit_chain_seq), a few rows."""
    if approval.state != states.STALE:
        return {}
    data = (
        AuditEvent.objects.filter(
            chain=chain_of(task_id=approval.task_id, tenant=approval.tenant),
            kind=AuditKind.APPROVAL_STALE,
            data__approval_id=str(approval.id),
        )
        .order_by("-chain_seq")
        .values_list("data", flat=True)
        .first()
    )
    return (data or {}).get("changed") or {}


def approvals_of_task(*, task_id) -> list[Approval]:
    return list(Approval.objects.filter(task_id=arguments.task_id(task_id)).order_by("seq"))


def approval_counts(*, tenant: str, soon_seconds: int = SOON_SECONDS) -> dict:
    """Pending approvals of the tenant, and how many of them expire within soon_seconds."""
    row = Approval.objects.filter(tenant=arguments.tenant(tenant), state=states.PENDING).aggregate(
        pending=Count("id"), soon=Count("id", filter=Q(expires_at__lte=Now() + timedelta(seconds=soon_seconds)))
    )
    return {"pending": row["pending"], "expiring_soon": row["soon"]}
