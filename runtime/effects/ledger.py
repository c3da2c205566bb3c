"""The effect ledger protocol: commit the intent, call with the key, commit the receipt.

    intent ──call──▶ committed        the service answered
       │  ├──────▶ failed            the service said it did not act (EffectNotApplied)
       │  └──────▶ partial           a boundary cut the answer midway (Cut); retaken on resume
       └─────────▶ unknown           it may have acted; a person decides (effect_resolve)

Recovery finds an `intent` with no receipt when the worker died mid-call. Reads,
idempotent actions and reversible actions on a keyed service are re-sent with the
same key (the service deduplicates); anything else becomes `unknown` and the task is
blocked until an operator resolves it. An irreversible effect is never re-sent
automatically (states.may_resend_with_same_key).

A `partial` effect is one the credential gateway cut mid-stream because its authority
went away (runtime/gateway/client.py raises Cut): part of the answer was delivered, and
its receipt says how much. The denial then propagates and the task is blocked. A later
attempt that replays it treats it like an interrupted intent: a re-sendable one (a
model call is idempotent and keyed) is retaken (`retake`: back to `intent` under the
new epoch, same key) and sent again on the authority the task has then, which the
gateway decides before forwarding anything; any other becomes `unknown`. The audit trail
keeps the partial receipt's digest (`effect.partial`, and `effect.resent` repeats it):
a payload is never copied into the hash-chained trail, where no erasure could reach it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Now

from runtime import encoding, faults, states
from runtime.attempts import interrupts, journal
from runtime.attempts.context import Context
from runtime.attempts.journal import JournalCall, Recorded
from runtime.attempts.transitions import end_attempt, fence
from runtime.audit import AuditKind, audit_append
from runtime.errors import (
    AuthorityDenied,
    CapabilityRefused,
    EffectFailed,
    EffectNotApplied,
    Fenced,
    NondeterminismError,
    NotJournalable,
    Suspend,
)
from runtime.meter import meter
from runtime.models import Effect

# In-attempt re-sends of a resendable effect whose call raised, before it is doubted.
RESEND_DELAYS = (0.2, 1.0)


class Cut(Exception):
    """Raised by an effect function when a boundary cut its call after the service began
    to answer (a gateway stream ended by AUTHZ_REVOKED): the ledger settles the effect
    `partial` with `receipt` (what was delivered), then raises `denial` itself."""

    def __init__(self, denial: AuthorityDenied, receipt: dict):
        super().__init__(str(denial))
        self.denial, self.receipt = denial, receipt


def derive_key(task_id, seq: int, name: str) -> str:
    """Stable across every retry and recovery of the same call."""
    return f"{task_id}/{seq}/{name}"[:255]


def replayed(recorded: Recorded):
    if recorded.error is not None:
        raise EffectFailed(recorded.name, recorded.error["type"], recorded.error["message"])
    return recorded.output


def perform(
    ctx: Context,
    journal_call: JournalCall,
    fn,
    args,
    kwargs,
    *,
    effect_class: str,
    key: str | None,
    keyed: bool,
    before_send=None,
    untrusted: bool = False,
):
    """Run the protocol for one effect. `before_send()`, when given, runs before the
    intent is written and before an earlier attempt's intent is re-sent: the worker's
    authority check (runtime/worker/authority.py), which raises to stop the send; this
    package never decides authority itself. `untrusted`: the receipt comes from a model
    or a tool (Effect.untrusted, and the journal row's). `journal_call`: a new call
    (journal.replay_or_run runs this only when nothing is journaled at its seq)."""
    seq, name = journal_call.seq, journal_call.name
    key = key or derive_key(ctx.task_id, seq, name)
    try:
        digest = encoding.digest({"name": name, "args": list(args), "kwargs": kwargs})
    except (TypeError, ValueError) as exc:
        raise NotJournalable(f"effect {name!r} arguments must be JSON: {exc}") from None
    call = _Call(ctx, seq, name, fn, args, kwargs, key, untrusted)
    row = Effect.objects.filter(key=key).first()
    if row is None:
        faults.reach(faults.BEFORE_EFFECT, task_id=ctx.task_id, step=name, epoch=ctx.epoch)
        if before_send is not None:
            before_send()  # a denial raises here: no intent, nothing sent
        row = _record_intent(call, effect_class=effect_class, keyed=keyed, digest=digest)
        return _send(call, row)
    if row.task_id != ctx.task_id or row.step_seq != seq:
        raise NotJournalable(f"effect key {key!r} already belongs to task {row.task_id} step {row.step_seq}")
    if row.request_digest != digest:
        raise NondeterminismError(
            f"effect {name!r} of task {ctx.task_id} is replayed with a different request than its intent"
        )
    if row.state == states.COMMITTED:
        return _journal_receipt(call, row.receipt)
    if row.state == states.EFFECT_FAILED:
        _journal_error(call, row.error)
    if row.state == states.UNKNOWN:
        _block(call, row, doubt=False)
    # An intent from an earlier attempt: the call may or may not have reached the service.
    # A partial one was cut midway by a boundary: the same rule decides whether it is sent again.
    if row.resend_approved or states.may_resend_with_same_key(row.effect_class, row.keyed):
        if before_send is not None:
            before_send()  # a recovered attempt re-checks before it sends again
        _take_over(call, row)
        return _send(call, row)
    _block(call, row, doubt=True)


@dataclass(slots=True)
class _Call:
    ctx: Context
    seq: int
    name: str
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    key: str
    untrusted: bool = False

    @property
    def lease(self):
        return self.ctx.lease


def _send(call: _Call, row: Effect):
    ctx = call.ctx
    delays = list(RESEND_DELAYS) if states.may_resend_with_same_key(row.effect_class, row.keyed) else []
    while True:
        try:
            with interrupts.region(interrupts.AGENT):  # the effect's own code: a stop interrupts it
                receipt = call.fn(*call.args, idempotency_key=call.key, **call.kwargs)
            break
        except EffectNotApplied as exc:
            error = encoding.error_record(exc)
            _settle(call, row, states.EffectEvent.REJECT, error=error, audit_kind=AuditKind.EFFECT_FAILED)
            _journal_error(call, error)
        except Cut as cut:
            # The boundary cut the answer midway: record what came, durably and fenced,
            # before the denial ends the attempt (the task is then blocked by it).
            receipt = json.loads(encoding.encode(cut.receipt, what=f"partial receipt of effect {call.name!r}"))
            _settle(
                call,
                row,
                states.EffectEvent.CUT,
                receipt=receipt,
                audit_kind=AuditKind.EFFECT_PARTIAL,
                denial=cut.denial.decision_id,
            )
            raise cut.denial from None
        except (AuthorityDenied, CapabilityRefused):
            # A boundary refused the call (the credential gateway, runtime/gateway/client.py):
            # not the service's answer, so nothing is settled or journaled. The intent
            # stays, and the task's next attempt asks again, on the authority it has then.
            raise
        except Exception as exc:
            if not delays:
                _block(call, row, doubt=True, cause=exc)
            time.sleep(delays.pop(0))
            _take_over(call, row)
    faults.reach(faults.AFTER_EFFECT_BEFORE_RECEIPT, task_id=ctx.task_id, step=call.name, epoch=ctx.epoch)
    try:
        text = encoding.encode(receipt, what=f"receipt of effect {call.name!r}")
    except NotJournalable:
        # The action happened; keep what we can show rather than lose the receipt.
        text = json.dumps({"unserializable_receipt": repr(receipt)[:2000]})
    receipt = json.loads(text)
    _settle(call, row, states.EffectEvent.COMMIT, receipt=receipt, audit_kind=AuditKind.EFFECT_COMMITTED)
    meter.count("effects_committed")  # _settle committed it
    faults.reach(faults.AFTER_RECEIPT_BEFORE_JOURNAL, task_id=ctx.task_id, step=call.name, epoch=ctx.epoch)
    return _journal_receipt(call, receipt, text)


def _record_intent(call: _Call, *, effect_class: str, keyed: bool, digest: str) -> Effect:
    lease = call.lease
    try:
        with transaction.atomic(durable=True):
            fence(lease, "effect")
            faults.reach(faults.IN_EFFECT_INTENT, task_id=lease.task_id, step=call.name, epoch=lease.epoch)
            row = Effect.objects.create(
                key=call.key,
                task_id=lease.task_id,
                tenant=lease.tenant,
                step_seq=call.seq,
                name=call.name,
                effect_class=effect_class,
                keyed=keyed,
                state=states.INTENT,
                request_digest=digest,
                attempt_id=lease.attempt_id,
                epoch=lease.epoch,
                sends=1,
                untrusted=call.untrusted,
            )
            _audit(
                lease,
                AuditKind.EFFECT_INTENT,
                row,
                **{"class": effect_class, "keyed": keyed, "step": call.seq, "attempt": lease.attempt_id},
            )
    except IntegrityError:  # another task's call took this (explicit) key first
        raise NotJournalable(f"effect key {call.key!r} is already used by another call") from None
    return row


def _take_over(call: _Call, row: Effect) -> None:
    """Make this attempt the ledger row's sender before sending again under its key. A
    `partial` row is retaken: back to `intent`, its partial receipt cleared from the row
    (an intent has none); the `effect.resent` audit row keeps its digest (a payload never
    goes into the trail, docs/adr/0038-erasure-lifecycle.md)."""
    lease = call.lease
    retake = row.state == states.PARTIAL
    changes = {"epoch": lease.epoch, "attempt_id": lease.attempt_id, "sends": F("sends") + 1, "resend_approved": False}
    if retake:
        changes.update(
            state=states.target(states.EffectEvent.RETAKE, states.EFFECT_TRANSITIONS), receipt=None, settled_at=None
        )
    with transaction.atomic(durable=True):
        fence(lease, "effect")
        won = Effect.objects.filter(id=row.id, state=row.state, epoch=row.epoch).update(**changes)
        if not won:  # another attempt took it over or settled it first
            raise Fenced(lease.task_id, lease.epoch, "effect")
        _audit(
            lease,
            AuditKind.EFFECT_RESENT,
            row,
            previous_epoch=row.epoch,
            approved_by=row.resolved_by if row.resend_approved else None,
            **({"partial_digest": _digest(row.receipt)} if retake else {}),
        )
    row.epoch, row.attempt_id, row.sends, row.resend_approved = lease.epoch, lease.attempt_id, row.sends + 1, False
    if retake:
        row.state, row.receipt, row.settled_at = states.INTENT, None, None


def _settle(call: _Call, row: Effect, event: str, *, receipt=None, error=None, audit_kind: AuditKind, **audit) -> None:
    """One EFFECT_TRANSITIONS event out of this attempt's intent: commit, reject or cut."""
    lease = call.lease
    state = states.target(event, states.EFFECT_TRANSITIONS)
    with transaction.atomic(durable=True):
        fence(lease, "effect")
        won = Effect.objects.filter(
            id=row.id, state__in=states.sources(event, states.EFFECT_TRANSITIONS), epoch=lease.epoch
        ).update(state=state, receipt=receipt, error=error, settled_at=Now())
        if not won:  # a newer attempt took the row over while we were calling
            raise Fenced(lease.task_id, lease.epoch, "effect")
        # The receipt and the error are payloads: the audit row names them by digest only,
        # so an erasure of the effect's row leaves no copy in the hash-chained trail
        # (docs/adr/0038-erasure-lifecycle.md).
        _audit(
            lease,
            audit_kind,
            row,
            receipt_digest=_digest(receipt),
            error=error and error.get("type"),
            error_digest=_digest(error),
            **audit,
        )


def _block(call: _Call, row: Effect, *, doubt: bool, cause: BaseException | None = None):
    """Mark the effect unknown (if it was an intent) and end the attempt blocked."""
    lease = call.lease
    with transaction.atomic(durable=True):
        fence(lease, "status", exclusive=True)
        if doubt:
            won = Effect.objects.filter(
                id=row.id, state__in=states.sources(states.EffectEvent.DOUBT, states.EFFECT_TRANSITIONS)
            ).update(state=states.UNKNOWN, error=encoding.error_record(cause) if cause else None)
            if not won:
                raise Fenced(lease.task_id, lease.epoch, "effect")
            _audit(
                lease,
                AuditKind.EFFECT_UNKNOWN,
                row,
                **{
                    "class": row.effect_class,
                    "keyed": row.keyed,
                    "cause": repr(cause)[:500] if cause else "interrupted",
                },
            )
        end_attempt(
            lease,
            states.TaskEvent.BLOCK,
            note=f"effect {row.name!r} (#{row.id}) has an unknown outcome: resolve it",
            audit={"effect": row.id},
        )
    raise Suspend("blocked")


def _journal_receipt(call: _Call, receipt, text: str | None = None):
    journal.write(
        call.lease,
        seq=call.seq,
        name=call.name,
        kind=states.StepKind.EFFECT,
        output=text or json.dumps(receipt),
        untrusted=call.untrusted,
    )
    return receipt


def _journal_error(call: _Call, error: dict):
    journal.write(call.lease, seq=call.seq, name=call.name, kind=states.StepKind.EFFECT, error=error)
    raise EffectFailed(call.name, error["type"], error["message"])


def _digest(payload) -> str | None:
    return None if payload is None else encoding.digest(payload)


def _audit(lease, kind: AuditKind, row: Effect, **data) -> None:
    """An effect.* audit row in the attempt's task chain (the caller's transaction)."""
    audit_append(
        actor=lease.actor,
        tenant=lease.tenant,
        task_id=lease.task_id,
        kind=kind,
        data={"effect": row.id, "key": row.key, "epoch": lease.epoch, **data},
    )
