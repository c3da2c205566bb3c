"""Reads for the CLI, the API and the console. Nothing here writes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from django.db.models import Q

from runtime import db, states
from runtime.audit import chain_for
from runtime.errors import InvalidInput, TaskNotFound
from runtime.ids import epoch_ms, uuid7_floor
from runtime.models import Attempt, AuditEvent, Effect, Pool, Step, Task
from runtime.paging import Keyset, Page, check_limit, decode_cursor, encode_cursor, keyset_page

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass
class TaskDetail:
    task: Task
    attempts: list[Attempt]
    steps: list[Step]
    effects: list[Effect]
    children: list[Task]
    audit: list[AuditEvent]


def task_get(task_id) -> Task:
    try:
        task = Task.objects.filter(id=task_id).first()
    except Exception:  # noqa: BLE001 - a malformed UUID is not found, not a crash
        task = None
    if task is None:
        raise TaskNotFound(f"no task {task_id}", task=str(task_id))
    return task


def task_detail(task_id, *, step_limit: int = 200, audit_limit: int = 200, child_limit: int = 200) -> TaskDetail:
    """A task with the latest of its journal, its audit chain and its first children,
    each read in its own index's order (a long-lived task's history is only paged)."""
    task = task_get(task_id)
    return TaskDetail(
        task=task,
        attempts=list(task.attempts.order_by("epoch")),
        steps=list(task.steps.order_by("-seq")[:step_limit])[::-1],
        effects=list(task.effects.order_by("step_seq")),
        children=list(task.children.order_by("spawn_seq")[:child_limit]),
        audit=list(AuditEvent.objects.filter(chain=chain_for(task_id=task.id, tenant=task.tenant))
                   .order_by("-chain_seq")[:audit_limit])[::-1],
    )


# --- pages (runtime/paging.py): newest first, from an index, with an opaque cursor ------------

TASKS_BY_ID = Keyset("tasks", ("id",), lambda key: [str(key[0])], lambda raw: (uuid.UUID(raw[0]),))
TASKS_BY_SPAWN = Keyset("tasks.children", ("spawn_seq",), list, lambda raw: (int(raw[0]),))


def task_page(*, tenant: str | None = None, status: str | None = None, agent: str | None = None,
              pool: str | None = None, parent=None, root=None, created_after: datetime | None = None,
              created_before: datetime | None = None, after: str | None = None, limit: int = 50) -> Page[Task]:
    """Tasks newest first (by id: ids are time-ordered, runtime/ids.py).

    The driving index, by the filters given: `parent` walks the parent's children by
    spawn order (task_one_child_per_spawn_step); `root` walks the tree below the root
    (task_tree; the root itself is not in the page); else tenant and status
    (task_tenant_status_id), tenant (task_tenant_id), status (task_status_id) or the
    primary key. A created range narrows the id range of whichever index drives (ids
    carry their creation millisecond), so it is never residual there. Every other
    filter is residual (runtime/paging.py).
    """
    filters = {"tenant": tenant, "status": status, "agent": agent, "pool": pool, "parent": parent,
               "root": root, "created_after": created_after, "created_before": created_before}
    if status is not None and status not in states.TASK_STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(states.TASK_STATUSES)}", field="status")
    equal = {"tenant": tenant, "status": status, "agent": agent, "pool_id": pool,
             "parent_id": _uuid(parent, "parent"), "root_id": _uuid(root, "root")}
    equal = {k: v for k, v in equal.items() if v is not None}
    created = {k: v for k, v in (("created_at__gte", created_after), ("created_at__lt", created_before))
               if v is not None}

    if "parent_id" in equal:
        driving_on, keyset = ("parent_id",), TASKS_BY_SPAWN
    elif "root_id" in equal:
        driving_on, keyset = ("root_id",), TASKS_BY_ID
    else:
        driving_on, keyset = tuple(k for k in ("tenant", "status") if k in equal), TASKS_BY_ID
    driving = Task.objects.filter(**{k: equal.pop(k) for k in driving_on})
    if "root_id" in driving_on:
        driving = driving.filter(parent__isnull=False)  # the partial index's predicate
    if keyset is TASKS_BY_ID:
        driving = driving.filter(_id_range(created_after, created_before), **created)
        created = {}
    return keyset_page(driving, keyset=keyset, filters=filters, after=after, limit=limit,
                       residual={**equal, **created})


def _id_range(created_after: datetime | None, created_before: datetime | None) -> Q:
    """created_at >= a and created_at < b, as bounds on the time-ordered id. A task's id
    carries the millisecond of its created_at, rounded down (migration 0005)."""
    bounds = Q()
    if created_after is not None:
        bounds &= Q(id__gte=uuid7_floor(epoch_ms(created_after)))
    if created_before is not None:
        bounds &= Q(id__lt=uuid7_floor(epoch_ms(created_before) + 1))
    return bounds


def _uuid(value, field: str):
    if value is None:
        return None
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        raise InvalidInput(f"{field} must be a task id", field=field) from None


EFFECTS_BY_ID = Keyset("effects", ("id",), list, lambda raw: (int(raw[0]),))
EFFECTS_BY_STEP = Keyset("effects.task", ("step_seq",), list, lambda raw: (int(raw[0]),))


def effect_page(*, task=None, state: str | None = None, effect_class: str | None = None,
                after: str | None = None, limit: int = 50) -> Page[Effect]:
    """The effect ledger newest first. With `task`, that task's effects by step (the
    effect_one_per_step index); else by state (effect_state_id) or all (the primary
    key). An unknown task is TASK_NOT_FOUND; the class is residual."""
    for field, value, allowed in (("state", state, states.EFFECT_STATES),
                                  ("effect_class", effect_class, states.EFFECT_CLASSES)):
        if value is not None and value not in allowed:
            raise InvalidInput(f"{field} must be one of {', '.join(allowed)}", field=field)
    filters = {"task": task, "state": state, "effect_class": effect_class}
    residual = {"effect_class": effect_class} if effect_class else {}
    if task is not None:
        driving, keyset = Effect.objects.filter(task_id=task_get(task).id), EFFECTS_BY_STEP
        if state:
            residual["state"] = state
    else:
        driving = Effect.objects.filter(state=state) if state else Effect.objects.all()
        keyset = EFFECTS_BY_ID
    return keyset_page(driving, keyset=keyset, filters=filters, after=after, limit=limit, residual=residual)


AUDIT_BY_TIME = Keyset("audit", ("at", "id"), lambda key: [_micros(key[0]), key[1]],
                       lambda raw: (_from_micros(int(raw[0])), int(raw[1])))
AUDIT_BY_CHAIN = Keyset("audit.task", ("chain_seq",), list, lambda raw: (int(raw[0]),))


def audit_page(*, tenant: str, task=None, actor: str | None = None, kind: str | None = None,
               since: datetime | None = None, until: datetime | None = None, after: str | None = None,
               limit: int = 50) -> Page[AuditEvent]:
    """A tenant's audit trail newest first: by time (audit_tenant_at: tenant, at, id),
    with `since` (inclusive) and `until` (exclusive) as bounds on the same index; or, with
    `task`, that task's chain by sequence (audit_chain_seq). Actor and kind are residual.
    """
    if not isinstance(tenant, str) or not tenant:
        raise InvalidInput("tenant is required", field="tenant")
    filters = {"tenant": tenant, "task": task, "actor": actor, "kind": kind, "since": since, "until": until}
    residual = {k: v for k, v in (("actor", actor), ("kind", kind)) if v}
    timed = {k: v for k, v in (("at__gte", since), ("at__lt", until)) if v is not None}
    if task is not None:
        chain = chain_for(task_id=_uuid(task, "task"), tenant=tenant)
        driving = AuditEvent.objects.filter(chain=chain, tenant=tenant)
        return keyset_page(driving, keyset=AUDIT_BY_CHAIN, filters=filters, after=after, limit=limit,
                           residual={**residual, **timed})
    driving = AuditEvent.objects.filter(tenant=tenant, **timed)
    return keyset_page(driving, keyset=AUDIT_BY_TIME, filters=filters, after=after, limit=limit,
                       residual=residual, past=_before_in_time)


def _before_in_time(qs, key):
    # A row comparison, so the index serves it as one range: (at, id) < (cursor's at, id).
    return qs.extra(where=['("steward_audit"."at", "steward_audit"."id") < (%s, %s)'], params=list(key))


def _micros(when: datetime) -> int:
    return (when - _EPOCH) // timedelta(microseconds=1)


def _from_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


# By name (pools are few, and found by name), not newest first.
POOLS_BY_NAME = Keyset("pools", ("name",), list, tuple)
MAX_POOLS = 500


@dataclass
class PoolUsage:
    pool: Pool
    running: int
    queued: int
    slots_held: int


def pool_usage(*, after: str | None = None, limit: int = MAX_POOLS) -> Page[PoolUsage]:
    """Pools by name with their usage, read from kept counts and held slots
    (runtime/sql/pool_usage.sql): the cost follows the number of pools, not tasks."""
    check_limit(limit)
    filters: dict = {}
    start = decode_cursor(POOLS_BY_NAME, filters, after)[0] if after is not None else ""
    usage = []
    for name, max_running, max_queued, created_at, admitted, running, held in db.fetchall(
            "pool_usage", {"after": start, "limit": limit + 1}):
        pool = Pool(name=name, max_running=max_running, max_queued=max_queued, created_at=created_at)
        usage.append(PoolUsage(pool, running, admitted - running, held))
    more = len(usage) > limit
    usage = usage[:limit]
    return Page(usage, encode_cursor(POOLS_BY_NAME, filters, (usage[-1].pool.name,)) if more else None)

