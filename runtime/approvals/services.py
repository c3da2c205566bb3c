"""Operator acts on approvals: a person's decision, and the sweep's expiry."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import psycopg
from django.db import transaction

from runtime import arguments, config, db, encoding, states
from runtime.attempts import dispatch
from runtime.audit import with_via
from runtime.authz import POLICY_VERSION, patterns
from runtime.errors import (
    ApprovalAlreadyDecided,
    ApprovalNotFound,
    ApprovalRequiresPerson,
    ApprovalStale,
    InvalidArgument,
    InvalidTransition,
    SelfApprovalRefused,
)
from runtime.models import Approval

DECISIONS = {"approve": states.APPROVED, "deny": states.DENIED}
COMMENT_MAX = 2000


@db.reads("approval_decide")
@dataclass(frozen=True, slots=True)
class _Decided:
    found_owner: str  # the package as found: its task's owner, state and task
    found_state: str
    found_task_id: uuid.UUID
    task_status: str | None  # the task's status, under its row lock
    requeued_pool: str | None  # the task's pool, when the decision queued it again
    changes: str | dict | None  # an approve that found the context changed: what changed (jsonb)
    approval: Approval | None  # the package as this decision moved it; None: it moved nothing


def approval_decide(*, approval_id, tenant: str, actor: str, decision: str, comment: str = "") -> Approval:
    """Approve or deny a pending approval, once.

    1. Check the actor is a person, the decision and the comment.
    2. Find the package in the tenant (ApprovalNotFound otherwise: an unknown id is an
       error, never ignored).
    3. Separation of duties: the person who started the task cannot approve it; and a
       task a stop reached (stopping, or finished) takes no decision (INVALID_TRANSITION).
    4. An approve checks what the package is bound to that needs no agent code: the
       tenant's authz_revision (read under lock, as the latest commit left it), the
       policy_version and the task's input digest. If any changed since the request, the
       package becomes `stale` (as the executor's re-check would have made it) and this
       raises ApprovalStale naming each change, before and after. A package past its
       expiry becomes `expired` and this raises ApprovalAlreadyDecided, state expired.
    5. One conditional UPDATE from `pending`: of two concurrent decisions, or a decision
       and the expiry sweep, exactly one wins; the loser gets ApprovalAlreadyDecided
       naming the state the winner left.
    6. Re-queue the task blocked on it (`decided`), and audit, in the same transaction;
       its wake-up goes out once that has committed. A stale or expired package re-queues
       it too: the agent's branch for it runs (it may ask again).

    Steps 2 to 6 are one statement, runtime/sql/approval_decide.sql, committed on its
    own (autocommit, as gateway_admit is): one round trip from a person's click to the
    wake-up where there were eight, each a wait for a CPU on a loaded machine. Inside a
    caller's transaction it commits with that transaction instead, and so does the
    wake-up (on_commit).
    """
    if not patterns.is_person(actor):
        raise ApprovalRequiresPerson(
            f"only a person (user:<name>) decides an approval, not {arguments.show(actor)}", actor=arguments.show(actor)
        )
    arguments.actor(actor)
    arguments.tenant(tenant)
    if decision not in DECISIONS:
        raise InvalidArgument("decision is approve or deny", field="decision")
    arguments.text("comment", comment, max_length=COMMENT_MAX)
    ident = _approval_id(approval_id)
    target = DECISIONS[decision]
    params = {
        "approval": ident,
        "tenant": tenant,
        "state": target,
        "actor": actor,
        "comment": comment,
        "closed": [*states.TERMINAL, states.STOPPING],
        "refuse_owner": decision == "approve" and config.approval_separation_of_duties(),
        "approve": decision == "approve",
        "policy_version": POLICY_VERSION,
        "data": json.dumps(with_via({"approval_id": str(ident), "comment": comment})),
    }
    try:
        found = db.fetchone("approval_decide", params, row=_Decided)
    except psycopg.errors.InsufficientPrivilege:
        # Migration 0017's trigger: this connection runs agent code.
        raise ApprovalRequiresPerson("an approval is never decided while agent code runs") from None
    if found is None:
        raise ApprovalNotFound(f"no approval {ident} in tenant {tenant}", approval_id=str(ident))
    owner, state, task_id, status, changes = (
        found.found_owner,
        found.found_state,
        found.found_task_id,
        found.task_status,
        found.changes,
    )
    moved = found.approval
    if moved is not None:
        if found.requeued_pool is not None:
            dispatch.pool_has_work(found.requeued_pool)
        if moved.state == states.STALE:
            changes = encoding.decode(changes) if isinstance(changes, str) else changes
            raise ApprovalStale(
                f"approval {ident} is stale: {moved.stale_reason}; the agent must ask again",
                approval_id=str(ident),
                state=states.STALE,
                changed=changes,
            )
        if moved.state == states.EXPIRED:
            raise ApprovalAlreadyDecided(
                f"approval {ident} is expired (at {moved.expires_at.isoformat()})",
                approval_id=str(ident),
                state=states.EXPIRED,
                decided_by=None,
                expires_at=moved.expires_at.isoformat(),
            )
        return moved
    if params["refuse_owner"] and actor == owner:
        raise SelfApprovalRefused(
            f"{actor} started task {task_id}; someone else must approve its requests", approval_id=str(ident)
        )
    if state == states.PENDING and (status in states.TERMINAL or status == states.STOPPING):
        # A stop got there first: nothing would act on the decision, so none is recorded.
        raise InvalidTransition(
            f"task {task_id} is {status}: its requests can no longer be decided", status=status, approval_id=str(ident)
        )
    # Another person decided first, the sweep expired it, or the executor found it
    # stale or consumed it: read again (this statement's snapshot may predate the
    # winner's commit) for the refusal.
    now = Approval.objects.filter(id=ident).values("state", "decided_by", "stale_reason", "checked_at").get()
    state = states.EXPIRED if now["state"] == states.PENDING else now["state"]
    # Stale and consumed are the executor's moves after a person approved (it stamps
    # checked_at), or an approve that found the package stale: "stale by alice" would
    # blame the approver for what changed.
    by = now["decided_by"] and (
        f" by {now['decided_by']}"
        if state in DECISIONS.values()
        else f" (approved by {now['decided_by']})"
        if now["checked_at"] is not None
        else f" (found when {now['decided_by']} approved it)"
    )
    raise ApprovalAlreadyDecided(
        f"approval {ident} is {state}{by or ''}" + (f": {now['stale_reason']}" if now["stale_reason"] else ""),
        approval_id=str(ident),
        state=state,
        decided_by=now["decided_by"],
    )


@db.reads("approval_expire_due")
@dataclass(frozen=True, slots=True)
class _Woken:
    pool: str
    count: int  # tasks of the pool queued again


def approvals_expire_due(*, actor: str) -> int:
    """Expire every pending approval past its expires_at and re-queue its task, in one
    statement (runtime/sql/approval_expire_due.sql); return how many tasks it woke."""
    woken = 0
    with transaction.atomic():
        for woke in db.fetchall("approval_expire_due", {"actor": actor}, row=_Woken):
            dispatch.pool_has_work(woke.pool, woke.count)
            woken += woke.count
    return woken


def _approval_id(value):
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        raise ApprovalNotFound(f"no approval {arguments.show(value)}", approval_id=arguments.show(value)) from None
