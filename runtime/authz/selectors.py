"""Reads of grants and decisions, a task's effective authority, and the tasks a change
to a principal's grants would reach (for the revocation preview)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q, Value
from django.db.models.functions import Left, Length, Now
from django.db.models.lookups import StartsWith

from runtime import arguments, db, states
from runtime.audit import AuditKind
from runtime.authz import patterns
from runtime.errors import DecisionNotFound, GrantNotFound, InvalidArgument, InvalidInput
from runtime.models import AuditEvent, AuthzRevision, Decision, Effect, GatewayCall, Grant, Task
from runtime.models.decision import BOUNDARIES
from runtime.paging import Keyset, Page, keyset_page
from runtime.tasks.selectors import task_get

# A grant's audit event lists this many of the tasks it reached (all are counted).
TASKS_SHOWN = 100
GRANT_ID_MAX = 2**63 - 1

DECISIONS_BY_ID = Keyset("decisions", ("id",), lambda key: [str(key[0])], lambda raw: (uuid.UUID(raw[0]),))


def _grant_id(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= GRANT_ID_MAX:
        raise GrantNotFound(f"no grant #{arguments.show(value)}", grant=arguments.show(value))
    return value


def grant_get(*, grant_id, tenant: str, lock: bool = False) -> Grant:
    """The grant, or GRANT_NOT_FOUND (also for another tenant's: never say it exists).
    With `lock`, its row lock for the rest of the transaction."""
    grants = Grant.objects.filter(id=_grant_id(grant_id), tenant=arguments.tenant(tenant))
    grant = (grants.select_for_update() if lock else grants).first()
    if grant is None:
        raise GrantNotFound(f"no grant #{grant_id}", grant=grant_id)
    return grant


def _live() -> Q:
    return Q(revoked_at__isnull=True) & (Q(expires_at__isnull=True) | Q(expires_at__gt=Now()))


def grants_of(*, tenant: str, principal: str | None = None, live_only: bool = True) -> list[Grant]:
    """A tenant's grants (a principal's, with `principal`), newest first. Live: neither
    revoked nor expired."""
    grants = Grant.objects.filter(tenant=arguments.tenant(tenant))
    if principal is not None:
        grants = grants.filter(principal=patterns.principal(principal))
    if live_only:
        grants = grants.filter(_live())
    return list(grants.order_by("-id"))


def authz_revision(*, tenant: str) -> int:
    """The tenant's current authz_revision; 0 before its first grant change."""
    row = AuthzRevision.objects.filter(tenant=arguments.tenant(tenant)).values_list("revision", flat=True).first()
    return row or 0


def decision_get(*, decision_id, tenant: str) -> Decision:
    """One decision of the tenant (another tenant's, or no such id: DECISION_NOT_FOUND)."""
    arguments.tenant(tenant)
    try:
        key = uuid.UUID(str(decision_id))
    except ValueError:
        key = None
    decision = Decision.objects.filter(id=key, tenant=tenant).select_related("task").first() if key else None
    if decision is None:
        raise DecisionNotFound(f"no decision {str(decision_id)[:40]}", decision=str(decision_id)[:40])
    return decision


def decision_audit(decision: Decision) -> AuditEvent | None:
    """A denial's `authz.denied` row in its task's chain (an allow writes none)."""
    if decision.allowed:
        return None
    return (
        AuditEvent.objects.filter(
            task_id=decision.task_id, kind=AuditKind.AUTHZ_DENIED, data__decision_id=str(decision.id)
        )
        .order_by("id")
        .first()
    )


def decisions_page(
    *,
    tenant: str,
    task=None,
    allowed: bool | None = None,
    boundary: str | None = None,
    principal: str | None = None,
    after: str | None = None,
    limit: int = 50,
) -> Page[Decision]:
    """A tenant's decisions newest first (decision_tenant_id), or one task's
    (decision_task_id; another tenant's task is TASK_NOT_FOUND). `allowed`, `boundary`
    and `principal` (the acting agent `agent:<name>`, or the owner `user:<name>`) are
    residual: matched within the scan window of the driving index."""
    arguments.tenant(tenant)
    if allowed is not None and not isinstance(allowed, bool):
        raise InvalidInput("allowed must be true or false", field="allowed")
    if boundary is not None and boundary not in BOUNDARIES:
        raise InvalidArgument(f"boundary must be one of {', '.join(BOUNDARIES)}", field="boundary")
    if principal is not None:
        patterns.principal(principal)
    filters = {"tenant": tenant, "task": task, "allowed": allowed, "boundary": boundary, "principal": principal}
    if task is not None:
        driving = Decision.objects.filter(task_id=task_get(arguments.task_filter(task, "task"), tenant=tenant).id)
    else:
        driving = Decision.objects.filter(tenant=tenant)
    residual: dict[str, object] = {"allowed": allowed} if allowed is not None else {}
    if boundary is not None:
        residual["boundary"] = boundary
    if principal is not None:
        residual["actor" if principal.startswith(patterns.AGENT) else "owner"] = principal
    return keyset_page(driving, keyset=DECISIONS_BY_ID, filters=filters, after=after, limit=limit, residual=residual)


@db.reads("authz_tasks_under")
@dataclass(frozen=True)
class TaskUnder:
    id: uuid.UUID
    agent: str
    status: str


def tasks_under(*, tenant: str, principal: str) -> list[TaskUnder]:
    """The live tasks acting under `principal` (as their agent or their owner) and the
    live tasks below them: what narrowing or revoking that principal's grants reaches.
    grant_revoke and grant_narrow record this list's length in their audit event."""
    arguments.tenant(tenant)
    patterns.principal(principal)
    return db.fetchall(
        "authz_tasks_under", {"tenant": tenant, "principal": principal, "live": sorted(states.LIVE)}, row=TaskUnder
    )


@dataclass(frozen=True)
class Authority:
    """One thing a task may do: `action` on what `resource` covers, until `expires_at`
    (None: no expiry)."""

    action: str
    resource: str
    expires_at: datetime | None


def effective_authority(task) -> list[Authority]:
    """What authorize() would allow the task now: the intersection, at the task and every
    ancestor, of the agent's live grants, the owner's live grants and what was asked for
    at spawn. For a page to show; authorize() decides, on its own statement."""
    found = task if isinstance(task, Task) else task_get(arguments.task_id(task))
    lineage = [found]
    while lineage[-1].parent_id is not None:
        lineage.append(Task.objects.get(id=lineage[-1].parent_id))
    principals = {p for t in lineage for p in (f"{patterns.AGENT}{t.agent}", t.owner)}
    live = list(Grant.objects.filter(_live(), tenant=found.tenant, principal__in=principals))
    held: list[Authority] | None = None
    for level in lineage:
        if level.tenant != found.tenant:
            return []  # authorize() denies as tenant_mismatch
        own = _meet_all(_of(live, f"{patterns.AGENT}{level.agent}"), _of(live, level.owner))
        if level.requested_scope is not None:
            own = _meet_all(own, [Authority(s["action"], s["resource"], None) for s in level.requested_scope])
        held = own if held is None else _meet_all(held, own)
    return _widest(held or [])


def _of(grants: list[Grant], principal: str) -> list[Authority]:
    return [Authority(g.action, g.resource, g.expires_at) for g in grants if g.principal == principal]


def _meet_all(a: list[Authority], b: list[Authority]) -> list[Authority]:
    out = []
    for x in a:
        for y in b:
            if x.action == y.action and (resource := patterns.meet(x.resource, y.resource)) is not None:
                ends = [e for e in (x.expires_at, y.expires_at) if e is not None]
                out.append(Authority(x.action, resource, min(ends) if ends else None))
    return out


def _widest(entries: list[Authority]) -> list[Authority]:
    """Drop entries another entry already covers for at least as long."""

    def lasts(a: Authority, b: Authority) -> bool:
        return a.expires_at is None or (b.expires_at is not None and a.expires_at >= b.expires_at)

    kept: list[Authority] = []
    for i, e in enumerate(entries):
        if not any(
            j != i
            and o.action == e.action
            and patterns.covers(o.resource, e.resource)
            and lasts(o, e)
            and (o != e or j < i)
            for j, o in enumerate(entries)
        ):
            kept.append(e)
    return sorted(kept, key=lambda a: (a.action, a.resource))


# --- the grants lists, a grant's history and what revoking it would reach -----------------------

GRANT_STATES = ("live", "revoked", "expired", "any")
GRANTS_SHOWN = 200
GRANTS_BY_ID = Keyset("grants", ("id",), list, lambda raw: (int(raw[0]),))


def _grants(*, tenant: str, principal: str | None, action: str | None, resource: str | None, state: str):
    """The grants the filters keep, as one query (no order, no bound): what the list and
    the pages read. `resource` keeps the grants whose pattern covers it or lies within it
    (prefix sets are nested or disjoint: a grant is related to the filter when either
    covers the other), in SQL, so no related grant is missed however many others there are."""
    grants = Grant.objects.filter(tenant=arguments.tenant(tenant))
    if principal is not None:
        grants = grants.filter(principal=patterns.principal(principal))
    if action is not None:
        grants = grants.filter(action=patterns.action(action))
    if state not in GRANT_STATES:
        raise InvalidArgument(f"state must be one of {', '.join(GRANT_STATES)}", field="state")
    if state == "live":
        grants = grants.filter(_live())
    elif state == "revoked":
        grants = grants.filter(revoked_at__isnull=False)
    elif state == "expired":
        grants = grants.filter(revoked_at__isnull=True, expires_at__lte=Now())
    if resource is not None:
        patterns.resource(resource)
        covering = Q(resource=resource) | (
            Q(resource__endswith="*") & Q(StartsWith(Value(resource), Left("resource", Length("resource") - 1)))
        )
        within = Q(resource__startswith=resource[:-1]) if resource.endswith("*") else Q(resource=resource)
        grants = grants.filter(covering | within)
    return grants


def grants_filtered(
    *,
    tenant: str,
    principal: str | None = None,
    action: str | None = None,
    resource: str | None = None,
    state: str = "live",
    limit: int = GRANTS_SHOWN,
) -> list[Grant]:
    """A tenant's grants newest first (grant_tenant_id, or grant_tenant_principal_id with
    a principal), at most `limit` (the console's list and the CLI's). State: live
    (neither revoked nor expired), revoked, expired (not revoked, past its expiry) or any."""
    grants = _grants(tenant=tenant, principal=principal, action=action, resource=resource, state=state)
    arguments.bounded("limit", limit, minimum=1, maximum=1000)
    return list(grants.order_by("-id")[:limit])


def grant_page(
    *,
    tenant: str,
    principal: str | None = None,
    action: str | None = None,
    resource: str | None = None,
    state: str = "live",
    after: str | None = None,
    limit: int = 50,
) -> Page[Grant]:
    """The grants grants_filtered lists, newest first, a keyset page at a time
    (runtime/paging.py): the API's list, with no cap on how far a client reads. The
    filters are part of the walk, not residual: a tenant's grants are its people's and
    agents' rights, thousands at most, and grant_tenant_id (grant_tenant_principal_id
    with a principal) serves the order."""
    filters = {"tenant": tenant, "principal": principal, "action": action, "resource": resource, "state": state}
    grants = _grants(tenant=tenant, principal=principal, action=action, resource=resource, state=state)
    return keyset_page(grants, keyset=GRANTS_BY_ID, filters=filters, after=after, limit=limit)


def grant_events(*, tenant: str):
    """The tenant's grant events (`grant.*`), as a query served by the partial index
    audit_grant_events (migration 0023): it holds grant events only, so a read of them
    costs the same beside ten million other audit rows as beside none. Filter on
    `data__grant` for one grant's (an index column too); keep `kind__startswith`, which
    is how the planner knows the index covers the query."""
    return AuditEvent.objects.filter(tenant=arguments.tenant(tenant), kind__startswith="grant.")


def grant_history(grant: Grant) -> list[AuditEvent]:
    """The grant's audit events oldest first: created, each narrowing, the revocation,
    each with who, when and why (off audit_grant_events, by the grant's id)."""
    return list(grant_events(tenant=grant.tenant).filter(data__grant=grant.id).order_by("id"))


def seeded_grants(*, tenant: str) -> set[tuple[str, str, str]]:
    """(principal, action, resource) of every grant the demo seed ever gave in the tenant,
    from its `grant.created` events: what became of each since is a person's doing."""
    return {
        (data["principal"], data["action"], data["resource"])
        for data in grant_events(tenant=tenant)
        .filter(kind=AuditKind.GRANT_CREATED, actor=patterns.SEED)
        .values_list("data", flat=True)
    }


@dataclass(frozen=True)
class InFlight:
    """An effect recorded but not answered (intent): a call that may be under way. A
    gateway stream among them is cut at its next chunk once the grant goes."""

    id: int
    task_id: uuid.UUID
    name: str
    effect_class: str
    gateway_route: str | None = None  # admitted by the credential gateway and not yet answered


@dataclass(frozen=True)
class RevocationPreview:
    grant: Grant
    tasks: list[TaskUnder]  # tasks_under(principal): what the audit event will count
    in_flight: list[InFlight]  # intent effects of those tasks
    revision: int  # the tenant's authz_revision the preview was read at

    @property
    def count(self) -> int:
        return len(self.tasks)


def revocation_preview(*, tenant: str, grant_id) -> RevocationPreview:
    """What revoking (or narrowing) the grant reaches, read now: the live tasks acting
    under its principal and their descendants (the same selector, tasks_under, that
    grant_revoke and grant_narrow count into their audit event, so the number shown is
    the number recorded unless a task starts or ends in between; the page shows the
    revision it was read at), and their calls in flight."""
    grant = grant_get(grant_id=grant_id, tenant=tenant)
    tasks = tasks_under(tenant=tenant, principal=grant.principal)
    ids = [t.id for t in tasks]
    effects = list(
        Effect.objects.filter(tenant=tenant, task_id__in=ids, state=states.INTENT).order_by("id")[:1000] if ids else []
    )
    # Which of them the gateway is serving now (a stream it will cut): its admitted call
    # under the same task and key (the worker sends the effect's key with the call).
    routes = (
        dict(
            ((c.task_id, c.idempotency_key), c.route)
            for c in GatewayCall.objects.filter(
                task_id__in={e.task_id for e in effects},
                idempotency_key__in=[e.key for e in effects],
                outcome="admitted",
            ).only("task_id", "idempotency_key", "route")
        )
        if effects
        else {}
    )
    return RevocationPreview(
        grant=grant,
        tasks=tasks,
        in_flight=[InFlight(e.id, e.task_id, e.name, e.effect_class, routes.get((e.task_id, e.key))) for e in effects],
        revision=authz_revision(tenant=tenant),
    )


def agent_authority(*, tenant: str, agent: str) -> dict[str, list[Authority]]:
    """What the agent may do now with each owner it has live root tasks for: its live
    grants met with that owner's (a child's authority is narrower still: its task page
    shows it). For the agent page; authorize() decides, on its own statement."""
    arguments.tenant(tenant)
    name = f"{patterns.AGENT}{agent}"
    patterns.principal(name, "agent")
    owners = sorted(
        set(
            Task.objects.filter(
                tenant=tenant, agent=agent, parent__isnull=True, status__in=sorted(states.LIVE)
            ).values_list("owner", flat=True)[:50]
        )
    )
    live = list(Grant.objects.filter(_live(), tenant=tenant, principal__in=[name, *owners]))
    mine = _of(live, name)
    return {owner: _widest(_meet_all(mine, _of(live, owner))) for owner in owners}
