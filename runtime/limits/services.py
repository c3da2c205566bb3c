"""Fleet-wide concurrency pools.

A pool admits at most `max_running + max_queued` tasks in {queued, running}; a submit
past that is refused with QUEUE_FULL. Running capacity is a set of slot rows: an attempt
holds one from its claim to its end (runtime/sql/claim.sql, attempt_end.sql), and
sleeping or waiting tasks hold none. Because both limits live in PostgreSQL they hold
across every worker process and host.

Pools exist because an operator created one (pool_create), or because a submit used the
default pool or an agent's declared pool for the first time. Naming any other pool is
UNKNOWN_POOL: a typo must not create a pool that escapes the limits an operator set.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction

from runtime import arguments, config, db
from runtime.audit import AuditKind, audit_append
from runtime.errors import PoolExists, PoolInUse, UnknownPool
from runtime.models import Pool, Slot, Task

# Pools are fleet-wide, not a tenant's: their audit rows go to the "tenant:system" chain.
SYSTEM_TENANT = "system"


def default_pool_name() -> str:
    return config.default_pool()["name"]


def pool_create(*, name: str, max_running: int, max_queued: int, actor: str, note: str = "") -> Pool:
    """Create a pool with its limits, audited.

    1. Check the name (a slug) and the limits against their maxima.
    2. Insert the pool, its free slots and a pool.created audit row in one transaction;
       a pool of that name already existing refuses with POOL_EXISTS and writes nothing.
    """
    _check(name=name, actor=actor, max_running=max_running, max_queued=max_queued)
    arguments.text("note", note)
    with transaction.atomic(durable=True):
        pool = _insert(
            name=name, max_running=max_running, max_queued=max_queued, actor=actor, why=note or "pool-create"
        )
        if pool is None:
            raise PoolExists(f"pool {name!r} already exists", pool=name)
        return pool


def pool_create_on_first_use(*, name: str, actor: str, why: str) -> None:
    """Create the default pool or an agent's declared pool with the default limits when a
    submit first uses it, audited with who and why. Runs on the caller's transaction (a
    spawn's) or its own; a concurrent first use may win instead, which is as good."""
    defaults = config.default_pool()
    limits = {"max_running": defaults["max_running"], "max_queued": defaults["max_queued"]}
    with transaction.atomic():
        # Through the owner's function (migration 0027): a worker may add a missing pool
        # and nothing more on steward_pool, a governance table.
        if not db.fetchrow("pool_first_use", {"name": name, **limits}, row=_FirstUse).created:
            return
        Slot.objects.bulk_create(Slot(pool_id=name, number=n) for n in range(limits["max_running"]))
        audit_append(
            actor=actor, tenant=SYSTEM_TENANT, kind=AuditKind.POOL_CREATED, data={"pool": name, **limits, "why": why}
        )


@db.reads("pool_first_use")
@dataclass(frozen=True)
class _FirstUse:
    created: bool


def first_use_reason(name: str, *, agent: str, agent_pool: str | None) -> str | None:
    """Why `name` may be created on first use, or None if only pool_create may create it."""
    if name == default_pool_name():
        return "first use of the default pool (DEFAULT_POOL)"
    if name == agent_pool:
        return f"first use of the pool declared by agent {agent}"
    return None


def pool_set_limits(*, name: str, actor: str, max_running: int | None = None, max_queued: int | None = None) -> Pool:
    """Change a pool's limits. Growing adds free slots at once. Shrinking deletes the
    free slots numbered past the new max_running; held ones finish their attempts and
    are never handed out again (claim.sql only takes numbers below max_running), and
    the supervisor deletes them once free. An unknown pool is UNKNOWN_POOL."""
    _check(name=name, actor=actor, max_running=max_running, max_queued=max_queued)
    with transaction.atomic(durable=True):
        pool = Pool.objects.select_for_update().filter(name=name).first()
        if pool is None:
            raise unknown_pool(name)
        before = (pool.max_running, pool.max_queued)
        if max_queued is not None:
            pool.max_queued = max_queued
        if max_running is not None:
            pool.max_running = max_running
            have = set(Slot.objects.filter(pool=pool).values_list("number", flat=True))
            Slot.objects.bulk_create(Slot(pool=pool, number=n) for n in range(max_running) if n not in have)
            # Only free slots can go; a held one stays until its attempt ends.
            Slot.objects.filter(pool=pool, number__gte=max_running, task__isnull=True).delete()
        if (pool.max_running, pool.max_queued) == before:
            return pool  # nothing changed: nothing to record
        pool.save(update_fields=["max_running", "max_queued"])
        audit_append(
            actor=actor,
            tenant=SYSTEM_TENANT,
            kind=AuditKind.POOL_LIMITS,
            data={"pool": name, "max_running": pool.max_running, "max_queued": pool.max_queued},
        )
        return pool


def pool_remove(*, name: str, actor: str, note: str = "") -> None:
    """Remove a pool that no task names, audited.

    1. Lock the pool row: a submit into it takes the same lock first (steward_submit),
       so none can add a task until we commit, and afterwards it finds no pool.
    2. Refuse with POOL_IN_USE if any task names it. Tasks are never deleted, so a pool
       that ever had a task stays, and its history keeps pointing at a real pool.
    3. Delete its slots and the row, and write pool.removed, in the same transaction.
    """
    arguments.pool_name(name)
    arguments.actor(actor)
    arguments.text("note", note)
    with transaction.atomic(durable=True):
        pool = Pool.objects.select_for_update().filter(name=name).first()
        if pool is None:
            raise unknown_pool(name)
        if Task.objects.filter(pool_id=name).exists():
            raise PoolInUse(f"pool {name!r} is named by tasks, which are kept forever; it cannot be removed", pool=name)
        Slot.objects.filter(pool=pool).delete()
        pool.delete()
        audit_append(
            actor=actor,
            tenant=SYSTEM_TENANT,
            kind=AuditKind.POOL_REMOVED,
            data={"pool": name, "max_running": pool.max_running, "max_queued": pool.max_queued, "why": note},
        )


def _insert(*, name: str, max_running: int, max_queued: int, actor: str, why: str) -> Pool | None:
    """Insert the pool, its free slots and its pool.created row on the caller's
    transaction; None (and nothing written) if a pool of that name exists, perhaps
    because a concurrent creator committed it while we waited on its row."""
    try:
        with transaction.atomic():  # a savepoint: losing must not break the caller's transaction
            pool = Pool.objects.create(name=name, max_running=max_running, max_queued=max_queued)
    except IntegrityError:
        return None
    Slot.objects.bulk_create(Slot(pool=pool, number=n) for n in range(max_running))
    audit_append(
        actor=actor,
        tenant=SYSTEM_TENANT,
        kind=AuditKind.POOL_CREATED,
        data={"pool": name, "max_running": max_running, "max_queued": max_queued, "why": why},
    )
    return pool


def _check(*, name, actor, max_running, max_queued) -> None:
    arguments.pool_name(name)
    arguments.actor(actor)
    if max_running is not None:
        arguments.bounded("max_running", max_running, minimum=1, maximum=config.pool_max_running())
    if max_queued is not None:
        arguments.bounded("max_queued", max_queued, minimum=0, maximum=config.pool_max_queued())


def unknown_pool(name: str) -> UnknownPool:
    return UnknownPool(
        f"no pool {name!r}; create it with `steward pool-create {name} --max-running N --max-queued M`", pool=name
    )


# Token budgets and service quotas are limits too; their services live by themselves
# (runtime/limits/budgets.py) and reach the web side from here, as every service does.
from runtime.limits.budgets import (  # noqa: E402, F401
    QUOTA_CALLS_MAX,
    QUOTA_WINDOW_MAX,
    SERVICE,
    TOKENS_MAX,
    VERSION_MAX,
    budget_set,
    quota_remove,
    quota_set,
)
