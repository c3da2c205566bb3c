"""Changing grants (people only) and deciding (authorize). Each grant change bumps the
tenant's authz_revision and writes its audit event in the same durable transaction; every
decision is a row, and every denial also an audit event in the task's chain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from runtime import arguments, db
from runtime.audit import AuditKind, audit_append, with_via
from runtime.authz import POLICY_VERSION, patterns
from runtime.authz.patterns import SEED  # noqa: F401 - the seed's actor, for the web side
from runtime.authz.selectors import TASKS_SHOWN, grant_get, seeded_grants, tasks_under
from runtime.errors import (
    ArgumentOutOfRange,
    AuthorityDenied,
    GrantNotNarrower,
    GrantRequiresPerson,
    InvalidArgument,
    InvalidTransition,
    TaskNotFound,
)
from runtime.models import Decision, Grant
from runtime.models.decision import BOUNDARIES


def _person(actor) -> str:
    """Grants change only by a person's hand. An agent, a task, a worker or text that came
    from agent code cannot name itself `user:...` through any path that reaches here: the
    worker's Context has no grant method, the web side sets actor from the session, and
    while agent code runs its connection may not write grants at all (migration 0012)."""
    arguments.actor(actor)
    if not patterns.is_person(actor):
        raise GrantRequiresPerson(
            f"only a person (user:<name>) may change grants, not {arguments.show(actor)}", actor=arguments.show(actor)
        )
    return actor


def _reason(value) -> str:
    """Why, for the audit event: required for a narrowing or a revocation, whichever door
    it came through (console, API, admin, CLI), so the trail always says why."""
    arguments.text("reason", value)
    if not value.strip():
        raise InvalidArgument("say why: the reason is kept in the audit trail", field="reason")
    return value.strip()


def _expiry(value, field: str = "expires_at") -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgument(f"{field} must be an aware datetime", field=field)
    if value <= timezone.now():
        raise ArgumentOutOfRange(f"{field} must be in the future", field=field)
    return value


@db.reads("authz_bump")
@dataclass(frozen=True, slots=True)
class _Bumped:
    revision: int  # the tenant's authz_revision after this change


def _bump(tenant: str) -> int:
    return db.fetchrow("authz_bump", {"tenant": tenant}, row=_Bumped).revision


def grant_create(
    *, tenant: str, principal: str, action: str, resource: str, expires_at: datetime | None = None, actor: str
) -> Grant:
    """Give `principal` `action` on `resource` (exact, or a prefix pattern) in `tenant`.

    1. Check the actor is a person and every argument's form.
    2. In one durable transaction: bump the tenant's authz_revision, insert the grant
       stamped with it, and audit `grant.created` naming the revision.
    """
    _person(actor)
    arguments.tenant(tenant)
    patterns.principal(principal)
    patterns.action(action)
    patterns.resource(resource)
    _expiry(expires_at)
    with transaction.atomic(durable=True):
        return _insert(
            tenant=tenant,
            principal=principal,
            action=action,
            resource=resource,
            expires_at=expires_at,
            actor=actor,
            revision=_bump(tenant),
        )


def grant_seed(*, tenant: str, principal: str, action: str, resource: str) -> Grant | None:
    """Give what the demo's seed gives (console/dev/demo/seed.py, debug only), as the seed
    (patterns.SEED) and at most once: never again after a person narrowed, revoked or
    removed it, and never beside a grant that would make it wider. Returns the grant
    made, or None when what is there was kept.

    1. Check every argument's form.
    2. In one durable transaction: bump the tenant's authz_revision first, which takes
       the lock every grant change of the tenant takes (two seeds racing make one grant).
    3. Keep what is there, rolling the bump back, when
       a. the seed gave this principal this action on this resource before (its
          `grant.created` is in the trail): whatever became of that grant since is a
          person's doing, a removal included;
       b. or a grant of the principal and action exists in any state (live, narrowed,
          revoked, expired) whose resource overlaps this one: a person's, or one an
          older seed made in a person's name. Adding this one beside it would re-create
          what was narrowed or revoked, or widen what is there.
    4. Otherwise insert it, granted by the seed, and audit `grant.created` by the seed.
    """
    arguments.tenant(tenant)
    patterns.principal(principal)
    patterns.action(action)
    patterns.resource(resource)
    with transaction.atomic(durable=True):
        revision = _bump(tenant)
        seeded_before = seeded_grants(tenant=tenant)
        overlapping = any(
            patterns.meet(resource, other) is not None
            for other in Grant.objects.filter(tenant=tenant, principal=principal, action=action).values_list(
                "resource", flat=True
            )
        )
        if (principal, action, resource) in seeded_before or overlapping:
            transaction.set_rollback(True)  # a revision counts committed changes only
            return None
        return _insert(
            tenant=tenant,
            principal=principal,
            action=action,
            resource=resource,
            expires_at=None,
            actor=patterns.SEED,
            revision=revision,
        )


def _insert(*, tenant, principal, action, resource, expires_at, actor, revision) -> Grant:
    """Insert a grant stamped with `revision` and audit `grant.created` naming it, on the
    caller's transaction (which bumped the revision)."""
    grant = Grant.objects.create(
        tenant=tenant,
        principal=principal,
        action=action,
        resource=resource,
        expires_at=expires_at,
        granted_by=actor,
        revision=revision,
    )
    audit_append(
        actor=actor,
        tenant=tenant,
        kind=AuditKind.GRANT_CREATED,
        data={
            "grant": grant.id,
            "principal": principal,
            "action": action,
            "resource": resource,
            "expires_at": expires_at,
            "authz_revision": revision,
        },
    )
    # Read back inside the transaction: the grant as this change left it (with
    # granted_at as the database set it), not as a later change may have.
    return Grant.objects.get(id=grant.id)


def grant_narrow(
    *, grant_id, tenant: str, resource: str | None = None, expires_at: datetime | None = None, actor: str, reason: str
) -> Grant:
    """Narrow a live grant: a resource within the old one, an expiry no later.

    1. Check the actor is a person, the arguments' forms, and that something narrows.
    2. In one durable transaction: bump the revision, lock the grant (a revoke or
       another narrow racing us has won or waits), refuse what would widen it
       (GRANT_NOT_NARROWER, rolling the bump back; migration 0011's trigger refuses it
       too), update it conditionally on still being live, and audit `grant.narrowed`
       with the values before and after.
    """
    _person(actor)
    arguments.tenant(tenant)
    reason = _reason(reason)
    if resource is None and expires_at is None:
        raise InvalidArgument("narrow what? give a resource, an expiry or both", field="resource")
    if resource is not None:
        patterns.resource(resource)
    _expiry(expires_at)
    with transaction.atomic(durable=True):
        revision = _bump(tenant)  # first: the lock order of grant_revoke
        grant = grant_get(grant_id=grant_id, tenant=tenant, lock=True)
        if grant.revoked_at is not None:
            raise InvalidTransition(
                f"grant {grant.id} was revoked by {grant.revoked_by}; it cannot be narrowed", status="revoked"
            )
        new_resource = grant.resource if resource is None else resource
        new_expiry = grant.expires_at if expires_at is None else expires_at
        if not patterns.covers(grant.resource, new_resource):
            raise GrantNotNarrower(
                f"{arguments.show(new_resource)} is not within {arguments.show(grant.resource)}", field="resource"
            )
        if grant.expires_at is not None and new_expiry > grant.expires_at:
            raise GrantNotNarrower(
                f"the grant expires at {grant.expires_at.isoformat()}; narrowing may only bring that earlier",
                field="expires_at",
            )
        # Live still, under our lock: only a writer bypassing this service could differ.
        won = Grant.objects.filter(id=grant.id, revoked_at__isnull=True).update(
            resource=new_resource, expires_at=new_expiry, narrowed_at=Now(), narrowed_by=actor, revision=revision
        )
        if not won:
            raise InvalidTransition(f"grant {grant.id} changed while it was being narrowed", status="changed")
        audit_append(
            actor=actor,
            tenant=tenant,
            kind=AuditKind.GRANT_NARROWED,
            data={
                "grant": grant.id,
                "principal": grant.principal,
                "action": grant.action,
                "from": {"resource": grant.resource, "expires_at": grant.expires_at},
                "to": {"resource": new_resource, "expires_at": new_expiry},
                "reason": reason,
                "authz_revision": revision,
                **_affected(tenant, grant.principal),
            },
        )
        return Grant.objects.get(id=grant.id)  # as this change left it


def grant_revoke(*, grant_id, tenant: str, actor: str, reason: str) -> Grant:
    """Revoke a live grant; revoking it again is INVALID_TRANSITION.

    1. Check the actor is a person and the arguments' forms.
    2. In one durable transaction: bump the revision, revoke with one conditional UPDATE
       (live -> revoked; a concurrent revoke that won leaves us 0 rows), and audit
       `grant.revoked` with the live tasks acting under the principal, counted by the
       same selector the preview uses (tasks_under), in this transaction.
    """
    _person(actor)
    arguments.tenant(tenant)
    reason = _reason(reason)
    with transaction.atomic(durable=True):
        # The revision row first, then the grant, in every grant change: one lock order,
        # so a narrow and a revoke racing cannot deadlock. A refused change rolls back
        # its bump with it: a revision counts committed changes only.
        revision = _bump(tenant)
        grant = grant_get(grant_id=grant_id, tenant=tenant)
        won = Grant.objects.filter(id=grant.id, tenant=tenant, revoked_at__isnull=True).update(
            revoked_at=Now(), revoked_by=actor, revoke_reason=reason, revision=revision
        )
        if not won:
            # Another revoke committed first: the bump above waited for it, so this
            # UPDATE already sees its revoked_at.
            raise InvalidTransition(f"grant {grant.id} is already revoked", status="revoked")
        audit_append(
            actor=actor,
            tenant=tenant,
            kind=AuditKind.GRANT_REVOKED,
            data={
                "grant": grant.id,
                "principal": grant.principal,
                "action": grant.action,
                "resource": grant.resource,
                "reason": reason,
                "authz_revision": revision,
                **_affected(tenant, grant.principal),
            },
        )
        return Grant.objects.get(id=grant.id)  # as this change left it


def _affected(tenant: str, principal: str) -> dict:
    rows = tasks_under(tenant=tenant, principal=principal)
    return {"affected_tasks": len(rows), "affected_task_ids": [str(r.id) for r in rows[:TASKS_SHOWN]]}


def authorize(*, task, action: str, resource: str, boundary: str, epoch: int | None = None) -> Decision:
    """Decide whether `task` may take `action` on `resource`, against current rows.

    1. Check the arguments' forms (the resource is one value, never a pattern).
    2. One statement (runtime/sql/authz_decide.sql): the intersection of the agent's and
       the owner's live grants, what the task asked for at spawn and, for a child, the
       same for every ancestor up to its root; record the Decision and, for a denial,
       an `authz.denied` audit event in the task's chain.
    3. Return the Decision. A denial raises nothing here: `raise_if_denied` turns one
       into AuthorityDenied for a caller that wants an exception.
    Runs on the caller's transaction when there is one, so a decision taken inside a
    transition commits (or rolls back) with it.
    """
    return decide(task=task, action=action, resource=resource, boundary=boundary, epoch=epoch)


def decide(
    *,
    task,
    action: str,
    resource: str,
    boundary: str,
    epoch: int | None = None,
    refuse: str | None = None,
    actor: str | None = None,
    evidence: dict | None = None,
    bound_tenant: str | None = None,
) -> Decision:
    """authorize(), or with `refuse`, a denial for a reason the caller found itself
    (runtime/authz/tokens.py), recorded and audited the same way. `actor` (default: the
    task's agent) and `evidence` (added to a denial's audit event) come from a token.
    With `bound_tenant`, `epoch` is binding too: a task of another tenant is denied
    tenant_mismatch, and one whose epoch moved on superseded_attempt, in the statement."""
    params = decision_params(
        task=task,
        action=action,
        resource=resource,
        boundary=boundary,
        epoch=epoch,
        refuse=refuse,
        actor=actor,
        evidence=evidence,
        bound_tenant=bound_tenant,
    )
    # One statement: inside a caller's transaction it needs no savepoint of its own (a
    # failure marks the caller's transaction for rollback either way); alone, it is its
    # own transaction.
    with transaction.atomic(savepoint=False):
        decided = db.fetchone("authz_decide", params, row=Decided)
        if decided is None:
            raise TaskNotFound(f"no task {params['task']}", task=str(params["task"]))
        return decided.decision


def decision_params(
    *,
    task,
    action: str,
    resource: str,
    boundary: str,
    epoch: int | None = None,
    refuse: str | None = None,
    actor: str | None = None,
    evidence: dict | None = None,
    bound_tenant: str | None = None,
    budgeted: bool = False,
    quota: str | None = None,
) -> dict:
    """decide()'s arguments checked and made the parameters of runtime/sql/authz_decide.sql,
    for a statement that extends it (the gateway's admission: runtime/sql/gateway_admit.sql)."""
    task_id = task.id if hasattr(task, "id") else arguments.task_id(task)
    patterns.action(action)
    patterns.concrete(resource)
    if boundary not in BOUNDARIES:
        raise InvalidArgument(f"boundary must be one of {', '.join(BOUNDARIES)}", field="boundary")
    if epoch is not None:
        arguments.bounded("epoch", epoch, minimum=0, maximum=2**31 - 1)
    return {
        "task": task_id,
        "action": action,
        "resource": resource,
        "boundary": boundary,
        "epoch": epoch,
        "policy": POLICY_VERSION,
        "refuse": refuse,
        "actor": actor,
        "bound_tenant": bound_tenant,
        "bound_epoch": epoch if bound_tenant is not None else None,
        "budgeted": budgeted,
        "quota": quota,
        "extra": json.dumps(with_via(evidence), default=str),
    }


@db.reads("authz_decide")
@dataclass(frozen=True, slots=True)
class Decided:
    decision: Decision  # the decision's row, as recorded


def raise_if_denied(decision: Decision) -> Decision:
    if not decision.allowed:
        raise AuthorityDenied(
            f"{decision.action} on {decision.resource} denied at {decision.boundary}: {decision.reason_code}",
            boundary=decision.boundary,
            reason_code=decision.reason_code,
            decision_id=str(decision.id),
            authz_revision=decision.authz_revision,
            policy_version=decision.policy_version,
        )
    return decision
