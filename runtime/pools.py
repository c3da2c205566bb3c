"""Fleet-wide concurrency pools.

A pool admits at most `max_running + max_queued` tasks in {queued, running}; a submit
past that is refused with QUEUE_FULL. Running capacity is a set of slot rows: an attempt
holds one from its claim to its end (runtime/sql/claim.sql, attempt_end.sql), and
sleeping or waiting tasks hold none. Because both limits live in PostgreSQL they hold
across every worker process and host.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from runtime import config
from runtime.audit import audit_append
from runtime.errors import StewardError
from runtime.models import Pool, Slot


# Pools are fleet-wide, not a tenant's: their audit rows go to the "tenant:system" chain.
SYSTEM_TENANT = "system"


def default_pool_name() -> str:
    return config.default_pool()["name"]


def pool_ensure(name: str) -> Pool:
    """The pool `name`, created with the default limits on first use."""
    pool = Pool.objects.filter(name=name).first()
    if pool is not None:
        return pool
    defaults = config.default_pool()
    try:
        with transaction.atomic():
            pool = Pool.objects.create(name=name, max_running=defaults["max_running"], max_queued=defaults["max_queued"])
            Slot.objects.bulk_create(Slot(pool=pool, number=n) for n in range(pool.max_running))
            return pool
    except IntegrityError:
        # Another process created it first; use theirs.
        return Pool.objects.get(name=name)


def pool_set_limits(*, name: str, actor: str, max_running: int | None = None,
                    max_queued: int | None = None) -> Pool:
    """Change a pool's limits. Growing adds free slots at once. Shrinking deletes the
    free slots numbered past the new max_running; held ones finish their attempts and
    are never handed out again (claim.sql only takes numbers below max_running), and
    the supervisor deletes them once free."""
    if max_running is not None and max_running < 1:
        raise StewardError("max_running must be at least 1", field="max_running")
    if max_queued is not None and max_queued < 0:
        raise StewardError("max_queued must be at least 0", field="max_queued")
    pool_ensure(name)
    with transaction.atomic(durable=True):
        pool = Pool.objects.select_for_update().get(name=name)
        before = (pool.max_running, pool.max_queued)
        if max_queued is not None:
            pool.max_queued = max_queued
        if max_running is not None:
            pool.max_running = max_running
            have = set(Slot.objects.filter(pool=pool).values_list("number", flat=True))
            Slot.objects.bulk_create(
                Slot(pool=pool, number=n) for n in range(max_running) if n not in have
            )
            # Only free slots can go; a held one stays until its attempt ends.
            Slot.objects.filter(pool=pool, number__gte=max_running, task__isnull=True).delete()
        if (pool.max_running, pool.max_queued) == before:
            return pool  # nothing changed: nothing to record
        pool.save(update_fields=["max_running", "max_queued"])
        audit_append(actor=actor, tenant=SYSTEM_TENANT, kind="pool.limits",
                     data={"pool": name, "max_running": pool.max_running, "max_queued": pool.max_queued})
        return pool

