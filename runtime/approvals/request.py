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
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple, NoReturn

from django.db import transaction
from django.db.models.functions import Now

from runtime import config, db, encoding, states
from runtime.approvals import package
from runtime.attempts import journal
from runtime.attempts.context import Context
from runtime.attempts.journal import JournalCall, Recorded, replay_or_run
from runtime.attempts.transitions import end_attempt, fence
from runtime.audit import AuditKind, audit_append
from runtime.errors import Fenced, InvalidArgument, Suspend
from runtime.meter import meter
from runtime.models import Approval, Step

MAX_PARTS = 20  # approvals one request may ask for at once


class ApprovalResult(NamedTuple):
    """What ctx.request_approval() returns once its package is decided."""

    approval_id: str
    state: str  # approved, denied, expired or stale (states.APPROVAL_STATES)
    decided_by: str | None
    comment: str
    reason: str  # why it is stale ("" otherwise)

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


def request(ctx: Context, ask: JournalCall, check: JournalCall, *, specs: list[dict]) -> list[ApprovalResult]:
    """Ask a person to approve each of `specs` ({action, effect_class, expires_in,
    precondition?, requires?}: one package each, its own id); return once all are decided,
    in the given order. Each is decided on its own: one may be approved, another denied.

    1. Replaying a journaled check: return what the agent was told then.
    2. Check each spec's form.
    3. First time: build each package (canonical action and hash, context digest, taint
       summary), insert them, journal their ids and end the attempt `await`, in one
       transaction; raise Suspend.
    4. Later attempts read the packages and the context in one statement
       (approval_read.sql). Every one decided (the usual case: the decision is what woke
       the task): rebuild each, re-check each approved one (package.changed), and record
       the outcomes and journal them at the check's seq in one fenced statement
       (approval_check.sql). Any read as pending: take the task's row lock and read
       again (so a decision that commits meanwhile waits for this transaction and then
       finds the task blocked again, and re-queues it: no wake-up is lost); one pending
       past its expiry is expired; any still pending ends the attempt `await` again,
       otherwise the check goes on as above, inside that transaction.
    """
    return replay_or_run(check, replay=_told, run=lambda check: _decided(ctx, ask, check, specs))


def _told(checked: Recorded) -> list[ApprovalResult]:
    """What the agent was told at the check, replayed."""
    return [ApprovalResult(**r) for r in checked.output["results"]]


def _decided(ctx: Context, ask: JournalCall, check: JournalCall, specs: list[dict]) -> list[ApprovalResult]:
    if not isinstance(specs, list) or not 1 <= len(specs) <= MAX_PARTS:
        raise InvalidArgument(f"ask for 1 to {MAX_PARTS} approvals at once", field="requests")
    name, check_seq = ask.name, check.seq
    drafts = [_draft(spec) for spec in specs]
    ids = replay_or_run(
        ask,
        replay=lambda asked: [uuid.UUID(i) for i in asked.output["approval_ids"]],
        run=lambda ask: _ask(ctx, ask.seq, name=name, drafts=drafts),
    )
    stored, facts = _read(ctx.lease, ids)
    if any(p.state == states.PENDING for p in stored):
        return _settle_locked(ctx, check_seq, name, ids, drafts)
    return _check(ctx, check_seq, name, ids, drafts, stored, facts)


class Draft(NamedTuple):
    """One spec, its form checked; built into a package against the context's facts."""

    action: Mapping
    effect_class: str
    expires_in: float
    precondition: object
    requires: object


def _draft(spec) -> Draft:
    if (
        not isinstance(spec, Mapping)
        or not {"action", "effect_class", "expires_in"} <= set(spec)
        or not set(spec) <= {"action", "effect_class", "expires_in", "precondition", "requires"}
    ):
        raise InvalidArgument(
            "each request is {action, effect_class, expires_in, precondition?, requires?}", field="requests"
        )
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
        raise InvalidArgument(
            f"expires_in is between 0 and {config.approval_max_seconds():g} seconds", field="expires_in"
        )
    return Draft(action, effect_class, expires_in, spec.get("precondition"), spec.get("requires"))


def _build(ctx, draft: Draft, facts: package.Facts) -> package.Built:
    return package.build(ctx, draft.action, facts=facts, precondition=draft.precondition, requires=draft.requires)


def _ask(ctx: Context, seq: int, *, name: str, drafts: list[Draft]) -> NoReturn:
    lease = ctx.lease
    facts = package.facts(lease.task_id)
    built = [_build(ctx, d, facts) for d in drafts]
    with transaction.atomic(durable=True):
        fence(lease, "approval")
        read_untrusted = Step.objects.filter(task_id=lease.task_id, seq__lt=seq, untrusted=True).count()
        made = []
        for part, (b, d) in enumerate(zip(built, drafts, strict=True)):
            clock = db.fetchone("clock", {"seconds": d.expires_in}, row=db.Clock)
            assert clock is not None  # the statement always answers one row
            later = clock.later
            made.append(
                Approval.objects.create(
                    tenant=lease.tenant,
                    task_id=lease.task_id,
                    seq=seq,
                    part=part,
                    name=name,
                    agent=ctx.agent,
                    owner=ctx.owner,
                    action=b.action,
                    action_hash=b.action_hash,
                    effect_class=d.effect_class,
                    context=b.context,
                    context_digest=b.context_digest,
                    untrusted=bool(b.untrusted_paths),
                    untrusted_paths=b.untrusted_paths,
                    expires_at=_utc(later),
                    untrusted_steps=read_untrusted,
                )
            )
        ids = [str(a.id) for a in made]
        journal.write(
            lease,
            seq=seq,
            name=name,
            kind=states.StepKind.APPROVAL,
            output=encoding.encode({"approval_ids": ids}, what="the approval"),
        )
        end_attempt(
            lease,
            states.TaskEvent.AWAIT,
            note=f"waiting for approval {', '.join(ids)}",
            audit={
                "approval_ids": ids,
                "action_hashes": [a.action_hash for a in made],
                "untrusted": any(a.untrusted for a in made),
            },
        )
    raise Suspend("approval")


@db.reads("approval_read")
@dataclass(frozen=True, slots=True)
class _Read:
    """A package as the re-check reads it, beside the context's facts now."""

    id: uuid.UUID
    state: str
    decided_by: str | None
    comment: str
    stale_reason: str
    action_hash: str
    context_digest: str
    context: str | dict  # jsonb, as text on this connection
    input_digest: str  # the task's, now
    authz_revision: int  # the tenant's, now


def _read(lease, ids: list) -> tuple[list[package.Stored], package.Facts]:
    """The packages in the order asked for, and the context's facts (approval_read.sql)."""
    rows = db.fetchall("approval_read", {"task": lease.task_id, "ids": ids}, row=_Read)
    found = {
        row.id: package.Stored(
            id=row.id,
            state=row.state,
            decided_by=row.decided_by,
            comment=row.comment,
            stale_reason=row.stale_reason,
            action_hash=row.action_hash,
            context_digest=row.context_digest,
            context=encoding.decode(row.context) if isinstance(row.context, str) else row.context,
        )
        for row in rows
    }
    return [found[i] for i in ids], package.Facts(
        input_digest=rows[0].input_digest, authz_revision=rows[0].authz_revision
    )


def _settle_locked(ctx, check_seq: int, name: str, ids: list, drafts: list[Draft]) -> list[ApprovalResult]:
    """Some package read as pending: decide, holding the task's row lock (see request()
    step 4), whether to wait again or to check."""
    lease = ctx.lease
    with transaction.atomic(durable=True):
        fence(lease, "approval_check", exclusive=True)
        # Expiry means deny, whether or not the sweep got there first.
        for approval_id in Approval.objects.filter(id__in=ids, state=states.PENDING, expires_at__lte=Now()).values_list(
            "id", flat=True
        ):
            if Approval.objects.filter(id=approval_id, state=states.PENDING).update(
                state=states.EXPIRED, decided_at=Now()
            ):
                audit_append(
                    actor=lease.actor,
                    tenant=lease.tenant,
                    task_id=lease.task_id,
                    kind=AuditKind.APPROVAL_EXPIRED,
                    data={"approval_id": str(approval_id)},
                )
        stored, facts = _read(lease, ids)  # a new snapshot, taken after the lock
        waiting = [str(p.id) for p in stored if p.state == states.PENDING]
        if waiting:
            end_attempt(
                lease,
                states.TaskEvent.AWAIT,
                note=f"waiting for approval {', '.join(waiting)}",
                audit={"approval_ids": waiting},
            )
            results = None
        else:
            results = _check(ctx, check_seq, name, ids, drafts, stored, facts)
    if results is None:
        raise Suspend("approval")  # the attempt ended `await` again, and that committed
    return results


@db.reads("approval_check")
@dataclass(frozen=True, slots=True)
class _Checked:
    owned: bool  # the attempt still holds the task (its fence)
    current: bool  # and the tenant's authz_revision is still the one checked against
    moved: int  # approved packages moved (consumed or stale)
    journaled: bool  # the check's journal row was written


def _check(
    ctx, check_seq: int, name: str, ids: list, drafts: list[Draft], stored: list[package.Stored], facts: package.Facts
) -> list[ApprovalResult]:
    """Every package decided: rebuild each, re-check the approved ones and record it all
    in one fenced statement (approval_check.sql), on the caller's transaction if any.
    If a grant changed between the read and that statement, it wrote nothing: read the
    new revision and check again."""
    lease = ctx.lease
    while True:
        built = [_build(ctx, d, facts) for d in drafts]
        results = [_outcome(ctx, p, b) for p, b in zip(stored, built, strict=True)]
        approved = [(r, p, b) for r, p, b in zip(results, stored, built, strict=True) if p.state == states.APPROVED]
        moves = [r for r, _, _ in approved]
        # What a stale one went stale against, before and after, for its audit row.
        changes = [package.moved(p, b) if r.state == states.STALE else {} for r, p, b in approved]
        checked = db.fetchone(
            "approval_check",
            {
                "task": lease.task_id,
                "epoch": lease.epoch,
                "revision": facts.authz_revision,
                "actor": lease.actor,
                "ids": [r.approval_id for r in moves],
                "states": [r.state for r in moves],
                "reasons": [r.reason for r in moves],
                "changes": [encoding.encode(c, what="what changed") for c in changes],
                "seq": check_seq,
                "name": name,
                "output": encoding.encode({"results": [r._asdict() for r in results]}, what="the approval's outcome"),
            },
            row=_Checked,
        )
        assert checked is not None  # the statement always answers one row
        if not checked.owned:
            raise Fenced(lease.task_id, lease.epoch, "approval_check")
        if checked.current:
            # Only this attempt moves an approved package (it holds the task's lease).
            assert checked.moved == len(moves), "only the attempt holding the lease re-checks an approval"
            if not checked.journaled:
                raise RuntimeError(
                    f"journal row {lease.task_id}#{check_seq} already exists for the live epoch {lease.epoch}"
                )
            db.after_commit(db.cursor(), lambda: meter.count("steps", tenant=lease.tenant))
            return results
        stored, facts = _read(lease, ids)


def _outcome(ctx, stored: package.Stored, built: package.Built) -> ApprovalResult:
    """An approved package re-checked (consumed, or stale with why); any other decided
    state as it stands."""
    state, reason = stored.state, stored.stale_reason
    if state == states.APPROVED:
        reason = package.changed(stored, built, ctx)
        state = states.STALE if reason else states.CONSUMED
    return ApprovalResult(str(stored.id), state, stored.decided_by, stored.comment, reason)


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)
