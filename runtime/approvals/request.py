"""The executor's side of an approval: ctx.request_approval() (runtime/worker/context.py).

A request takes two journal seqs. The first (kind `approval`) records the package's id
and is written in the transaction that inserts the package and ends the attempt
`await`. The second (kind `approval_check`) records what the agent was told once the
package was decided: approved (after the re-check found nothing changed), denied,
expired or stale. A replay past the second returns it without asking again, so an
approval is acted on at most once: the effect the agent then runs goes through the
effect ledger, which never runs a journaled effect twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import NamedTuple

from django.db import transaction
from django.db.models.functions import Now

from runtime import config, db, encoding, states
from runtime.approvals import package
from runtime.attempts import journal
from runtime.attempts.journal import Recorded
from runtime.attempts.transitions import end_attempt, fence
from runtime.audit import audit_append
from runtime.errors import InvalidArgument, Suspend
from runtime.models import Approval, Step


class ApprovalResult(NamedTuple):
    """What ctx.request_approval() returns once its package is decided."""

    approval_id: str
    state: str            # approved, denied, expired or stale (states.APPROVAL_STATES)
    decided_by: str | None
    comment: str
    reason: str           # why it is stale ("" otherwise)

    @property
    def approved(self) -> bool:
        return self.state == states.CONSUMED

    @property
    def expired(self) -> bool:
        return self.state == states.EXPIRED

    @property
    def denied(self) -> bool:
        return self.state in (states.DENIED, states.EXPIRED)

    @property
    def stale(self) -> bool:
        return self.state == states.STALE


def request(ctx, seq: int, recorded: Recorded | None, check_seq: int, checked: Recorded | None, *, name: str,
            action, effect_class: str, expires_in: float, precondition=None, requires=None) -> ApprovalResult:
    """Ask a person to approve `action`; return once it is decided.

    1. Replaying a journaled check: return what the agent was told then.
    2. Build the package (canonical action and hash, context digest, taint summary).
    3. First time: insert it, journal its id and end the attempt `await`, in one
       transaction; raise Suspend.
    4. Later attempts: read its state. Still pending before expiry: end the attempt
       again. Pending past expiry: expire it. Approved: re-check (verify). Then journal
       the outcome at the check's seq and return it.
    """
    if checked is not None:
        return ApprovalResult(**checked.output)
    if effect_class not in states.EFFECT_CLASSES:
        raise ValueError(f"effect_class must be one of {states.EFFECT_CLASSES}")
    if not isinstance(action, Mapping):
        raise InvalidArgument("an approval's action is a JSON object", field="action")
    try:
        expires_in = float(expires_in)
    except (TypeError, ValueError):
        raise InvalidArgument("expires_in is a number of seconds", field="expires_in") from None
    if not 0 < expires_in <= config.approval_max_seconds():
        raise InvalidArgument(f"expires_in is between 0 and {config.approval_max_seconds():g} seconds",
                              field="expires_in")
    built = package.build(ctx, action, precondition=precondition, requires=requires)
    if recorded is None:
        _ask(ctx, seq, name=name, built=built, effect_class=effect_class, expires_in=expires_in)
    approval = Approval.objects.get(id=recorded.output["approval_id"], task_id=ctx.task_id)
    return _settle(ctx, check_seq, name, approval, built)


def _ask(ctx, seq: int, *, name: str, built: package.Built, effect_class: str, expires_in: float):
    lease = ctx.lease
    with transaction.atomic(durable=True):
        fence(lease, "approval")
        now, later = db.fetchone("clock", {"seconds": expires_in})
        approval = Approval.objects.create(
            tenant=lease.tenant, task_id=lease.task_id, seq=seq, name=name, agent=ctx.agent, owner=ctx.owner,
            action=built.action, action_hash=built.action_hash, effect_class=effect_class,
            context=built.context, context_digest=built.context_digest, untrusted=bool(built.untrusted_paths),
            untrusted_paths=built.untrusted_paths, expires_at=_utc(later),
            untrusted_steps=Step.objects.filter(task_id=lease.task_id, seq__lt=seq, untrusted=True).count())
        journal.write(lease, seq=seq, name=name, kind="approval",
                      output=encoding.encode({"approval_id": str(approval.id)}, what="the approval"))
        end_attempt(lease, "await", note=f"waiting for approval {approval.id}",
                    audit={"approval_id": str(approval.id), "action_hash": built.action_hash,
                           "effect_class": effect_class, "untrusted": approval.untrusted})
    raise Suspend("approval")


def _settle(ctx, check_seq: int, name: str, approval: Approval, built: package.Built) -> ApprovalResult:
    lease = ctx.lease
    with transaction.atomic(durable=True):
        fence(lease, "approval_check")
        state, reason = approval.state, approval.stale_reason
        if state == states.PENDING:
            # Woken before a decision (a lost race with the sweep, or an expiry the
            # sweep has not reached): expired if its time has passed, else wait again.
            if Approval.objects.filter(id=approval.id, state=states.PENDING, expires_at__lte=Now()).update(
                    state=states.EXPIRED, decided_at=Now()):
                state = states.EXPIRED
                audit_append(actor=lease.actor, tenant=lease.tenant, task_id=lease.task_id, kind="approval.expired",
                             data={"approval_id": str(approval.id)})
            else:
                end_attempt(lease, "await", note=f"waiting for approval {approval.id}",
                            audit={"approval_id": str(approval.id)})
                state = None
        elif state == states.APPROVED:
            reason = package.changed(approval, built, ctx)
            state = states.STALE if reason else states.CONSUMED
            # Only this attempt moves an approved package (it holds the task's lease).
            moved = Approval.objects.filter(id=approval.id, state=states.APPROVED).update(
                state=state, stale_reason=reason, checked_at=Now())
            assert moved == 1, "only the attempt holding the lease re-checks an approval"
            audit_append(actor=lease.actor, tenant=lease.tenant, task_id=lease.task_id,
                         kind="approval.stale" if reason else "approval.consumed",
                         data={"approval_id": str(approval.id), **({"reason": reason} if reason else {})})
        if state is None:
            result = None  # the attempt ended `await` again: raise once it committed
        else:
            result = ApprovalResult(str(approval.id), state, approval.decided_by, approval.comment, reason)
            journal.write(lease, seq=check_seq, name=name, kind="approval_check",
                          output=encoding.encode(result._asdict(), what="the approval's outcome"))
    if result is None:
        raise Suspend("approval")
    return result


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc)
