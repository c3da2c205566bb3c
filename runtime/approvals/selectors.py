"""Reads for the inbox, the API, the CLI and the task page."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import BooleanField, Count, Q, Value
from django.db.models.functions import Now

from runtime import arguments, states
from runtime.approvals.services import _approval_id
from runtime.audit import AuditKind, chain_of
from runtime.errors import ApprovalNotFound, InvalidInput
from runtime.models import Approval, AuditEvent

ORDERS = {"newest": ("-id",), "expiry": ("expires_at", "id")}
SOON_SECONDS = 3600  # "about to expire" on the dashboard: within the hour
NEW_COUNTED_MAX = 100  # the inbox's "N new": counted up to this, then "100+"
WATCHED_MAX = 500  # the rows one live poll asks about (the inbox lists at most 200)


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
    ids: list[str] | None = None,
) -> list[Approval]:
    """The tenant's approvals, pending by default: newest first or soonest to expire.
    `agents`: only those agents' requests (the caller's per-agent rights), None for all;
    `ids`: only those requests (the inbox's rows that moved), None for all."""
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
    if ids is not None:
        rows = rows.filter(id__in=[_approval_id(value) for value in ids])
    return list(rows.order_by(*ORDERS[order])[:limit])


def approval_newest_id(*, tenant: str, state: str | None = None, agent: str | None = None):
    """The newest request matching the filters (None when there is none): the inbox's
    snapshot, after which a request counts as new, whatever order the page lists in."""
    rows = Approval.objects.filter(tenant=arguments.tenant(tenant))
    if state is not None:
        rows = rows.filter(state=state)
    if agent is not None:
        rows = rows.filter(agent=agent)
    return rows.order_by("-id").values_list("id", flat=True).first()


@dataclass(frozen=True)
class ApprovalsMoved:
    states: dict[str, str]  # approval id (text) -> its state now, for the ids asked about (this tenant's)
    newer: int  # requests matching the filters made after `newer_than`, up to NEW_COUNTED_MAX


def approvals_moved(
    *, tenant: str, ids, newer_than=None, state: str | None = None, agent: str | None = None
) -> ApprovalsMoved:
    """What the inbox on screen needs to stay current without moving, in one statement
    (one snapshot): the state now of each request it shows (primary-key lookups), and
    how many requests matching its filters arrived after its snapshot (ids are
    time-ordered, so "after" is a range of the approval_tenant_id index; counted up to
    NEW_COUNTED_MAX). An id that is malformed or not the tenant's is left out, as a row
    that is gone: the page keeps it as it is."""
    tenant = arguments.tenant(tenant)
    if state is not None and state not in states.APPROVAL_STATES:
        raise InvalidInput(f"state must be one of {', '.join(states.APPROVAL_STATES)}", field="state")
    wanted = []
    for value in list(ids)[:WATCHED_MAX]:
        try:
            wanted.append(_approval_id(value))
        except ApprovalNotFound:
            continue
    shown = (
        Approval.objects.filter(tenant=tenant, id__in=wanted)
        .annotate(new=Value(False, output_field=BooleanField()))
        .values_list("id", "state", "new")
        .order_by()
    )
    if newer_than is not None:
        try:
            newest = _approval_id(newer_than)
        except ApprovalNotFound:
            raise InvalidInput("newer_than must be an approval id", field="newer_than") from None
        newer = Approval.objects.filter(tenant=tenant, id__gt=newest)
        if state is not None:
            newer = newer.filter(state=state)
        if agent is not None:
            newer = newer.filter(agent=agent)
        newer = (
            newer.annotate(new=Value(True, output_field=BooleanField()))
            .values_list("id", "state", "new")
            .order_by("id")[:NEW_COUNTED_MAX]
        )
        # One UNION ALL: both halves read in the same snapshot and one round trip.
        shown = shown.union(newer, all=True)
    found = list(shown)
    return ApprovalsMoved(
        states={str(id_): state_now for id_, state_now, new in found if not new},
        newer=sum(1 for *_, new in found if new),
    )


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
