"""What an operator does to the effect ledger: resolve an effect whose outcome is unknown.

A durable transaction that takes `actor=`, makes conditional writes and writes its audit
rows in the same transaction. Not callable from agent code: agents only get a Context.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models.functions import Now

from runtime import arguments, config, db, encoding, states
from runtime.attempts import dispatch
from runtime.audit import AuditKind, audit_append
from runtime.errors import EffectNotFound, InvalidArgument, InvalidTransition
from runtime.models import Effect, Task

RESOLUTIONS = {
    "committed": states.EffectEvent.RESOLVE_COMMITTED,  # it happened; the receipt (if any) is recorded
    "failed": states.EffectEvent.RESOLVE_FAILED,  # it did not happen; the agent sees EffectFailed
    "retry": states.EffectEvent.RESOLVE_RETRY,  # send it again under the same key
}


def effect_resolve(*, effect_id: int, outcome: str, actor: str, receipt=None, note: str = "") -> Effect:
    """Settle an `unknown` effect by an operator's decision, and unblock its task.

    1. Lock the task row first (the executor's order: task, then effect).
    2. Move the effect out of `unknown` with one conditional UPDATE.
    3. Queue the task if it was blocked (reason `resume`); its replay reads the
       ledger: a receipt, an EffectFailed, or a re-send under the same key.
    """
    arguments.effect_id(effect_id)
    arguments.actor(actor)
    arguments.text("note", note)
    if outcome not in RESOLUTIONS:
        raise InvalidArgument(f"outcome must be one of {sorted(RESOLUTIONS)}", field="outcome")
    if receipt is not None:  # checked before anything is read or written
        encoding.plain(receipt, what="receipt", limit=config.max_output_bytes(), setting="STEWARD_MAX_OUTPUT_BYTES")
    effect = Effect.objects.filter(id=effect_id).first()
    if effect is None:
        raise EffectNotFound(f"no effect #{effect_id}", effect=effect_id)
    event = RESOLUTIONS[outcome]
    now = Now()  # the database's clock, as every stored time (runtime/models/__init__.py)
    changes: dict[str, object] = {
        "state": states.target(event, states.EFFECT_TRANSITIONS),
        "resolved_by": actor,
        "resolution_note": note,
    }
    if outcome == "committed":
        changes.update(receipt=receipt if receipt is not None else {"resolved_by": actor, "note": note}, settled_at=now)
    elif outcome == "failed":
        message = note or f"{actor} recorded that it did not happen"
        changes.update(error={"type": "ResolvedAsNotApplied", "message": message}, settled_at=now)
    else:
        changes.update(resend_approved=True)
    sources = states.sources(event, states.EFFECT_TRANSITIONS)
    with transaction.atomic(durable=True):
        db.execute("lock_task", {"task": effect.task_id})
        won = Effect.objects.filter(id=effect.id, state__in=sources).update(**changes)
        if not won:
            # Read again under the task's lock, which every resolver takes first: the
            # state read above may predate another operator's resolution.
            state = Effect.objects.filter(id=effect.id).values_list("state", flat=True).get()
            raise InvalidTransition(
                f"effect #{effect.id} is {state}, not unknown: only an unknown effect is resolved", state=state
            )
        task = Task.objects.get(id=effect.task_id)
        audit_append(
            actor=actor,
            tenant=task.tenant,
            task_id=task.id,
            kind=AuditKind.EFFECT_RESOLVED,
            data={"effect": effect.id, "key": effect.key, "outcome": outcome, "note": note},
        )
        # Only a task blocked on an unknown effect: one blocked by a denial waits for its
        # grants to change and an explicit resume (states.BLOCKED_BY), whatever we settle.
        unblocked = Task.objects.filter(
            id=task.id,
            status__in=states.sources(states.TaskEvent.UNBLOCK),
            blocked_reason=states.BLOCKED_BY[states.TaskEvent.UNBLOCK],
        ).update(
            status=states.QUEUED,
            next_reason=states.RESUME,
            queued_at=now,
            status_note="",
            updated_at=now,
            blocked_reason=None,
            blocked_decision=None,
        )
        if unblocked:
            audit_append(
                actor=actor,
                tenant=task.tenant,
                task_id=task.id,
                kind=AuditKind.TASK_UNBLOCKED,
                data={"effect": effect.id},
            )
            dispatch.pool_has_work(task.pool_id)
    effect.refresh_from_db()
    return effect


def receipt_parse(text: str | bytes):
    """A receipt typed as JSON text (the console's resolve form), parsed within the
    same limits as an output, then checked by effect_resolve."""
    return encoding.parse(text, what="receipt", limit=config.max_output_bytes(), setting="STEWARD_MAX_OUTPUT_BYTES")
