"""Reads of pools for the CLI, the API and the console."""

from __future__ import annotations

from dataclasses import dataclass

from runtime import arguments, db
from runtime.errors import UnknownPool
from runtime.models import Pool
from runtime.paging import Keyset, Page, check_limit, decode_cursor, encode_cursor

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
    usage = _usage({"after": start, "limit": limit + 1, "only": None})
    more = len(usage) > limit
    usage = usage[:limit]
    return Page(usage, encode_cursor(POOLS_BY_NAME, filters, (usage[-1].pool.name,)) if more else None)


def pool_usage_of(name: str) -> PoolUsage:
    """One pool's usage (the same statement, for that pool only), or UNKNOWN_POOL."""
    found = _usage({"after": "", "limit": 1, "only": arguments.pool_name(name)})
    if not found:
        raise UnknownPool(f"no pool {name!r}", pool=name)
    return found[0]


def _usage(params: dict) -> list[PoolUsage]:
    return [PoolUsage(Pool(name=name, max_running=max_running, max_queued=max_queued, created_at=created_at),
                      running, admitted - running, held)
            for name, max_running, max_queued, created_at, admitted, running, held
            in db.fetchall("pool_usage", params)]


from runtime.limits.budgets import budget_get, budget_use, quota_list  # noqa: E402, F401 - reads of budgets
