"""The executor's side of an approval: ctx.request_approval() and ctx.request_approvals()
(runtime/worker/context.py).

A request takes two journal seqs. The first (kind `approval`) records the packages' ids
(one per approval asked for, each decided on its own) and is written in the transaction that inserts the package and ends the attempt
`await`. The second (kind `approval_check`) records what the agent was told once every
package was decided: approved (after the re-check found nothing changed), denied,
expired or stale. A replay past the second returns it without asking again, so an
approval is acted on at most once: the effect the agent then runs goes through the
effect ledger, which never runs a journaled effect twice.
"""

from __future__ import annotations

import uuid
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

MAX_PARTS = 20  # approvals one request may ask for at once


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
            specs: list[dict]) -> list[ApprovalResult]:
    """Ask a person to approve each of `specs` ({action, effect_class, expires_in,
    precondition?, requires?}: one package each, its own id); return once all are decided,
    in the given order. Each is decided on its own: one may be approved, another denied.

    1. Replaying a journaled check: return what the agent was told then.
    2. Build each package (canonical action and hash, context digest, taint summary).
    3. First time: insert them, journal their ids and end the attempt `await`, in one
       transaction; raise Suspend.
    4. Later attempts, holding the task's row lock (so a decision that commits meanwhile
       waits for this transaction and then finds the task blocked again, and re-queues
       it: no wake-up is lost): read their states. Pending past expiry: expire it. Any
       still pending: end the attempt `await` again. Otherwise re-check each approved one
       (package.changed), and journal the outcomes at the check's seq.
    """
    if checked is not None:
        return [ApprovalResult(**r) for r in checked.output["results"]]
    if not isinstance(specs, list) or not 1 <= len(specs) <= MAX_PARTS:
        raise InvalidArgument(f"ask for 1 to {MAX_PARTS} approvals at once", field="requests")
    built = [_build(ctx, spec) for spec in specs]
    if recorded is None:
        _ask(ctx, seq, name=name, built=built)
    return _settle(ctx, check_seq, name, [uuid.UUID(i) for i in recorded.output["approval_ids"]],
                   [b for b, _, _ in built])


def _build(ctx, spec) -> tuple[package.Built, str, float]:
    if not isinstance(spec, Mapping) or not {"action", "effect_class", "expires_in"} <= set(spec) \
            or not set(spec) <= {"action", "effect_class", "expires_in", "precondition", "requires"}:
        raise InvalidArgument("each request is {action, effect_class, expires_in, precondition?, requires?}",
                              field="requests")
    effect_class, action = spec["effect_class"], spec["action"]
    if effect_class not in states.EFFECT_CLASSES:
        raise ValueError(f"effect_class must be one of {states.EFFECT_CLASSES}")
    if not isinstance(action, Mapping):
        raise InvalidArgument("an approval's action is a JSON object", field="action")
    try:
        expires_in = float(spec["expires_in"])
    except (TypeError, ValueError):
        raise InvalidArgument("expires_in is a number of seconds", field="expires_in") from None
    if not 0 < expires_in <= config.approval_max_seconds():
        raise InvalidArgument(f"expires_in is between 0 and {config.approval_max_seconds():g} seconds",
                              field="expires_in")
    built = package.build(ctx, action, precondition=spec.get("precondition"), requires=spec.get("requires"))
    return built, effect_class, expires_in


def _ask(ctx, seq: int, *, name: str, built: list[tuple[package.Built, str, float]]):
    lease = ctx.lease
    with transaction.atomic(durable=True):
        fence(lease, "approval")
        read_untrusted = Step.objects.filter(task_id=lease.task_id, seq__lt=seq, untrusted=True).count()
        made = []
        for part, (b, effect_class, expires_in) in enumerate(built):
            _, later = db.fetchone("clock", {"seconds": expires_in})
            made.append(Approval.objects.create(
                tenant=lease.tenant, task_id=lease.task_id, seq=seq, part=part, name=name, agent=ctx.agent,
                owner=ctx.owner, action=b.action, action_hash=b.action_hash, effect_class=effect_class,
                context=b.context, context_digest=b.context_digest, untrusted=bool(b.untrusted_paths),
                untrusted_paths=b.untrusted_paths, expires_at=_utc(later), untrusted_steps=read_untrusted))
        ids = [str(a.id) for a in made]
        journal.write(lease, seq=seq, name=name, kind="approval",
                      output=encoding.encode({"approval_ids": ids}, what="the approval"))
        end_attempt(lease, "await", note=f"waiting for approval {', '.join(ids)}",
                    audit={"approval_ids": ids, "action_hashes": [a.action_hash for a in made],
                           "untrusted": any(a.untrusted for a in made)})
    raise Suspend("approval")


def _settle(ctx, check_seq: int, name: str, ids: list, built: list[package.Built]) -> list[ApprovalResult]:
    lease = ctx.lease
    with transaction.atomic(durable=True):
        fence(lease, "approval_check", exclusive=True)  # the task's row lock: see step 4
        # Expiry means deny, whether or not the sweep got there first.
        for approval_id in Approval.objects.filter(id__in=ids, state=states.PENDING, expires_at__lte=Now()) \
                .values_list("id", flat=True):
            if Approval.objects.filter(id=approval_id, state=states.PENDING).update(state=states.EXPIRED,
                                                                                     decided_at=Now()):
                audit_append(actor=lease.actor, tenant=lease.tenant, task_id=lease.task_id, kind="approval.expired",
                             data={"approval_id": str(approval_id)})
        found = {a.id: a for a in Approval.objects.filter(id__in=ids, task_id=lease.task_id)}
        approvals = [found[i] for i in ids]
        waiting = [str(a.id) for a in approvals if a.state == states.PENDING]
        if waiting:
            end_attempt(lease, "await", note=f"waiting for approval {', '.join(waiting)}",
                        audit={"approval_ids": waiting})
            results = None
        else:
            results = [_outcome(ctx, a, b) for a, b in zip(approvals, built, strict=True)]
            journal.write(lease, seq=check_seq, name=name, kind="approval_check",
                          output=encoding.encode({"results": [r._asdict() for r in results]},
                                                 what="the approval's outcome"))
    if results is None:
        raise Suspend("approval")  # the attempt ended `await` again, and that committed
    return results


def _outcome(ctx, approval: Approval, built: package.Built) -> ApprovalResult:
    """An approved package re-checked (consumed, or stale with why); any other decided
    state as it stands."""
    lease = ctx.lease
    state, reason = approval.state, approval.stale_reason
    if state == states.APPROVED:
        reason = package.changed(approval, built, ctx)
        state = states.STALE if reason else states.CONSUMED
        # Only this attempt moves an approved package (it holds the task's lease and row).
        moved = Approval.objects.filter(id=approval.id, state=states.APPROVED).update(
            state=state, stale_reason=reason, checked_at=Now())
        assert moved == 1, "only the attempt holding the lease re-checks an approval"
        audit_append(actor=lease.actor, tenant=lease.tenant, task_id=lease.task_id,
                     kind="approval.stale" if reason else "approval.consumed",
                     data={"approval_id": str(approval.id), **({"reason": reason} if reason else {})})
    return ApprovalResult(str(approval.id), state, approval.decided_by, approval.comment, reason)


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc)
