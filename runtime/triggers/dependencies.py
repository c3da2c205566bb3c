"""Dependency triggers: submit a task once every named task has completed.

A prerequisite that failed or was cancelled decides by the trigger's `on_failure`:
`skip` (settle as skipped, no task), `fail` (settle as failed, no task), or `run` (wait
until every prerequisite has finished, then submit anyway). Settling is one conditional
UPDATE (WHERE state = 'waiting') in the transaction that submits, under a row lock taken
with SKIP LOCKED, and the task's caller key is the trigger's id: two supervisors settle
a trigger once, and a crash between the two writes rolls both back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import transaction
from django.db.models.functions import Now

from runtime import arguments, db, states
from runtime.audit import AuditKind, audit_append
from runtime.errors import InvalidArgument, StewardError, TriggerNotFound
from runtime.models import DependencyTrigger, Task
from runtime.models.trigger import DEPENDENCY_POLICIES
from runtime.tasks.services import task_submit
from runtime.triggers import target

PREREQUISITES_MAX = 100


def dependency_create(
    *,
    tenant: str,
    agent: str,
    input: dict,
    owner: str,
    prerequisites: list,
    actor: str,
    on_failure: str = "skip",
    pool: str | None = None,
) -> DependencyTrigger:
    """Make a dependency trigger.

    1. Check the target as task_submit would, and the policy.
    2. Every prerequisite must be a task of this tenant (an unknown id is an error,
       never a trigger that waits forever).
    3. Insert it and audit `dependency.created` in one transaction; the next sweep
       settles it if its prerequisites have already finished.
    """
    target.check(tenant=tenant, agent=agent, input=input, owner=owner, pool=pool, actor=actor)
    target.choice("on_failure", on_failure, DEPENDENCY_POLICIES)
    if not isinstance(prerequisites, list) or not 0 < len(prerequisites) <= PREREQUISITES_MAX:
        raise InvalidArgument(f"prerequisites must be a list of 1-{PREREQUISITES_MAX} task ids", field="prerequisites")
    ids = sorted({str(arguments.task_id(p)) for p in prerequisites})
    with transaction.atomic(durable=True):
        found = {str(i) for i in Task.objects.filter(id__in=ids, tenant=tenant).values_list("id", flat=True)}
        missing = [i for i in ids if i not in found]
        if missing:
            raise InvalidArgument(
                f"prerequisites name tasks that do not exist in {tenant!r}: {', '.join(missing[:5])}",
                field="prerequisites",
                missing=missing[:20],
            )
        trigger = DependencyTrigger.objects.create(
            tenant=tenant,
            agent=agent,
            input=input,
            owner=owner,
            pool=pool,
            prerequisites=ids,
            on_failure=on_failure,
            created_by=actor,
        )
        audit_append(
            actor=actor,
            tenant=tenant,
            kind=AuditKind.DEPENDENCY_CREATED,
            data={"trigger": str(trigger.id), "agent": agent, "prerequisites": ids, "on_failure": on_failure},
        )
    return trigger


def dependency_get(trigger_id, *, tenant: str | None = None) -> DependencyTrigger:
    return target.get(DependencyTrigger, TriggerNotFound, "dependency trigger", trigger_id, tenant)


@db.reads("dependency_ready")
@dataclass(frozen=True, slots=True)
class _Ready:
    id: uuid.UUID  # a waiting trigger whose prerequisites decide it


def dependencies_settle(*, actor: str, limit: int = 200) -> int:
    """The sweep's step: settle every waiting trigger whose prerequisites decide it."""
    settled = 0
    for ready in db.fetchall("dependency_ready", {"limit": limit}, row=_Ready):
        settled += dependency_settle(trigger_id=ready.id, actor=actor)
    return settled


def dependency_settle(*, trigger_id, actor: str) -> bool:
    """Settle one trigger if its prerequisites decide it; True if this call settled it."""
    with transaction.atomic(durable=True):
        trigger = (
            DependencyTrigger.objects.select_for_update(skip_locked=True).filter(id=trigger_id, state="waiting").first()
        )
        if trigger is None:
            return False  # another supervisor holds or settled it
        statuses = dict(Task.objects.filter(id__in=trigger.prerequisites).values_list("id", "status"))
        values = [statuses.get(uuid.UUID(i)) for i in trigger.prerequisites]
        bad = sorted(
            i for i, s in zip(trigger.prerequisites, values, strict=True) if s in (states.FAILED, states.CANCELLED)
        )
        finished = all(s in states.TERMINAL for s in values)
        if bad and trigger.on_failure in ("skip", "fail"):
            return _settle(
                trigger,
                actor,
                state="skipped" if trigger.on_failure == "skip" else "failed",
                reason=f"prerequisite {bad[0]} {statuses[uuid.UUID(bad[0])]}"
                + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""),
            )
        if not finished:
            return False
        return _settle(
            trigger,
            actor,
            state="fired",
            reason="every prerequisite completed"
            if not bad
            else f"{len(bad)} prerequisite(s) failed or were cancelled; run anyway (on_failure run)",
        )


# A settled trigger's state -> its audit kind.
SETTLED = {
    "fired": AuditKind.DEPENDENCY_FIRED,
    "skipped": AuditKind.DEPENDENCY_SKIPPED,
    "failed": AuditKind.DEPENDENCY_FAILED,
}


def _settle(trigger: DependencyTrigger, actor: str, *, state: str, reason: str) -> bool:
    task_id = None
    if state == "fired":
        try:
            with transaction.atomic():  # a savepoint: a refused submission settles the trigger as failed
                task_id = task_submit(
                    agent=trigger.agent,
                    input=trigger.input,
                    tenant=trigger.tenant,
                    owner=trigger.owner,
                    actor=actor,
                    pool=trigger.pool,
                    idempotency_key=f"dependency:{trigger.id}",
                ).task_id
        except StewardError as exc:
            state, reason = "failed", f"submission refused: {exc.code}: {exc.message[:300]}"
    # Locked by this transaction: always wins; the WHERE names the race it would be
    # without the lock (another supervisor settling the same trigger).
    won = DependencyTrigger.objects.filter(id=trigger.id, state="waiting").update(
        state=state, reason=reason[:500], task=task_id, settled_at=Now()
    )
    assert won == 1
    audit_append(
        actor=actor,
        tenant=trigger.tenant,
        task_id=task_id,
        kind=SETTLED[state],
        data={
            "trigger": str(trigger.id),
            "reason": reason,
            "on_failure": trigger.on_failure,
            **({"task": str(task_id)} if task_id else {}),
        },
    )
    return True
