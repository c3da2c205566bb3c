"""Operator acts on approvals: a person's decision, and the sweep's expiry."""

from __future__ import annotations

import uuid

from django.db import DatabaseError, transaction
from django.db.models.functions import Now

from runtime import arguments, config, db, states
from runtime.attempts import dispatch
from runtime.audit import audit_append
from runtime.authz import patterns
from runtime.errors import (
    ApprovalAlreadyDecided,
    ApprovalNotFound,
    ApprovalRequiresPerson,
    InvalidArgument,
    InvalidTransition,
    SelfApprovalRefused,
)
from runtime.models import Approval, Task

DECISIONS = {"approve": states.APPROVED, "deny": states.DENIED}
COMMENT_MAX = 2000


def approval_decide(*, approval_id, tenant: str, actor: str, decision: str, comment: str = "") -> Approval:
    """Approve or deny a pending approval, once.

    1. Check the actor is a person, the decision and the comment.
    2. Find the package in the tenant (ApprovalNotFound otherwise: an unknown id is an
       error, never ignored).
    3. Separation of duties: the person who started the task cannot approve it; and a
       task a stop reached (stopping, or finished) takes no decision (INVALID_TRANSITION).
    4. One conditional UPDATE from `pending` before `expires_at`: of two concurrent
       decisions, or a decision and the expiry sweep, exactly one wins; the loser gets
       ApprovalAlreadyDecided naming the state the winner left.
    5. Re-queue the task blocked on it (`decided`), and audit, in the same transaction.
    """
    if not patterns.is_person(actor):
        raise ApprovalRequiresPerson(f"only a person (user:<name>) decides an approval, not {arguments.show(actor)}",
                                     actor=arguments.show(actor))
    arguments.actor(actor)
    arguments.tenant(tenant)
    if decision not in DECISIONS:
        raise InvalidArgument("decision is approve or deny", field="decision")
    arguments.text("comment", comment, max_length=COMMENT_MAX)
    ident = _approval_id(approval_id)
    try:
        with transaction.atomic(durable=True):
            return _decide(ident, tenant, actor, decision, comment)
    except DatabaseError as exc:
        # Migration 0017's trigger: this connection runs agent code.
        if getattr(getattr(exc, "__cause__", None), "sqlstate", None) == "42501":
            raise ApprovalRequiresPerson("an approval is never decided while agent code runs") from None
        raise


def _decide(ident, tenant: str, actor: str, decision: str, comment: str) -> Approval:
    approval = Approval.objects.filter(id=ident, tenant=tenant).first()
    if approval is None:
        raise ApprovalNotFound(f"no approval {ident} in tenant {tenant}", approval_id=str(ident))
    if decision == "approve" and config.approval_separation_of_duties() and actor == approval.owner:
        raise SelfApprovalRefused(f"{actor} started task {approval.task_id}; someone else must approve its requests",
                                  approval_id=str(ident))
    # The pool too, read now: the wake-up below needs it, and this saves it a round trip
    # on the way from a decision to the resumed step (a task's pool never changes).
    status, pool = Task.objects.filter(id=approval.task_id).values_list("status", "pool_id").get()
    if approval.state == states.PENDING and (status in states.TERMINAL or status == states.STOPPING):
        # A stop got there first: nothing would act on the decision, so none is recorded.
        raise InvalidTransition(f"task {approval.task_id} is {status}: its requests can no longer be decided",
                                status=status, approval_id=str(ident))
    target = DECISIONS[decision]
    won = Approval.objects.filter(id=ident, state=states.PENDING, expires_at__gt=Now()).update(
        state=target, decided_by=actor, decided_at=Now(), comment=comment)
    if not won:
        # Another person decided first, the sweep expired it, or the executor found it
        # stale or consumed it: read again for the refusal.
        now = Approval.objects.filter(id=ident).values("state", "decided_by", "stale_reason").get()
        state = states.EXPIRED if now["state"] == states.PENDING else now["state"]
        # Stale and consumed are the executor's moves after a person approved: "stale by
        # alice" would blame the approver for what changed since.
        by = now["decided_by"] and (f" by {now['decided_by']}" if state in DECISIONS.values()
                                    else f" (approved by {now['decided_by']})")
        raise ApprovalAlreadyDecided(f"approval {ident} is {state}{by or ''}"
                                     + (f": {now['stale_reason']}" if now["stale_reason"] else ""),
                                     approval_id=str(ident), state=state, decided_by=now["decided_by"])
    requeued = Task.objects.filter(id=approval.task_id, status=states.BLOCKED,
                                   blocked_reason=states.BLOCKED_BY["decided"]).update(
        status=states.target("decided"), next_reason=states.RESUME, blocked_reason=None, queued_at=Now(),
        crash_count=0, status_note=f"approval {ident} {target} by {actor}", updated_at=Now())
    audit_append(actor=actor, tenant=tenant, task_id=approval.task_id, kind=f"approval.{target}",
                 data={"approval_id": str(ident), "comment": comment, "action_hash": approval.action_hash,
                       "task_requeued": bool(requeued)})
    if requeued:
        dispatch.pool_has_work(pool)
    approval.refresh_from_db()
    return approval


def approvals_expire_due(*, actor: str) -> int:
    """Expire every pending approval past its expires_at and re-queue its task, in one
    statement (runtime/sql/approval_expire_due.sql); return how many tasks it woke."""
    woken = 0
    with transaction.atomic():
        for pool, count in db.fetchall("approval_expire_due", {"actor": actor}):
            dispatch.pool_has_work(pool, count)
            woken += count
    return woken


def _approval_id(value):
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        raise ApprovalNotFound(f"no approval {arguments.show(value)}", approval_id=arguments.show(value)) from None
