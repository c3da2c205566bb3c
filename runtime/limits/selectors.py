"""Reads of pools, breakers and tree pauses for the CLI, the API and the console."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from runtime import arguments, db, states
from runtime.errors import UnknownPool
from runtime.limits.breakers import limit_name
from runtime.models import Pool, Task, TreePause
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


@db.reads("pool_usage")
@dataclass(frozen=True, slots=True)
class _Usage:
    name: str
    max_running: int
    max_queued: int
    created_at: datetime
    admitted: int  # queued + running, from the kept counts
    running: int
    held: int  # slots held


def _usage(params: dict) -> list[PoolUsage]:
    return [
        PoolUsage(
            Pool(name=u.name, max_running=u.max_running, max_queued=u.max_queued, created_at=u.created_at),
            u.running,
            u.admitted - u.running,
            u.held,
        )
        for u in db.fetchall("pool_usage", params, row=_Usage)
    ]


@dataclass(frozen=True)
class Tripped:
    """A task's tripped breaker, as the console shows it and its resume form asks."""

    breaker: str  # states.BREAKERS
    limit_name: str  # the limit it enforces (arguments.BREAKER_LIMITS)
    limit: int | None  # the limit in force when it tripped
    observed: object  # what it counted
    message: str


def breaker_tripped(task) -> Tripped | None:
    """What tripped, for a task blocked by a breaker (None otherwise)."""
    if task.status != states.BLOCKED or task.blocked_reason != states.BREAKER_TRIPPED or not task.breaker:
        return None
    error = task.error or {}
    return Tripped(
        task.breaker, limit_name(task.breaker), error.get("limit"), error.get("observed"), str(error.get("message", ""))
    )


@db.reads("tree_pause_view")
@dataclass(frozen=True)
class PauseView:
    """A tree's open pause (runtime/limits/pauses.py), as it stands now."""

    id: int
    root_id: object
    task_id: object  # the task whose spawn tripped the breaker
    breaker: str
    limit: int
    observed: int
    paused_at: object
    held_at_pause: int  # idle tasks the pause held at once
    holding: int  # tasks blocked by it now: what lifting it queues again
    running: int  # tasks of the tree still running: each stops before its next new step


def tree_pause_of(task) -> PauseView | None:
    """The open pause of the task's tree (None if it is not paused): one statement
    (runtime/sql/tree_pause_view.sql)."""
    return db.fetchone("tree_pause_view", {"root": task.root_id or task.id}, row=PauseView)


def open_pauses(*, tenant: str, limit: int = 10) -> list:
    """The tenant's paused trees, newest first (the dashboard): each open pause with its
    tripped task's agent, for a line that names them."""
    return list(
        TreePause.objects.filter(tenant=tenant, released_at__isnull=True)
        .select_related("task")
        .only("id", "root_id", "task__id", "task__agent", "breaker", "limit", "observed", "paused_at")
        .order_by("-id")[:limit]
    )


def tree_pause_holds(task, *, limit: int = 200) -> list:
    """The tasks its tree's pause holds now (what a resume would queue again), by id."""
    root = task.root_id or task.id
    return list(
        Task.objects.filter(
            Q(id=root) | Q(root_id=root, parent_id__isnull=False),
            status=states.BLOCKED,
            blocked_reason=states.TREE_PAUSED,
        )
        .order_by("id")
        .only("id", "agent", "status", "blocked_reason")[:limit]
    )


from runtime.limits.budgets import budget_get, budget_use, quota_list  # noqa: E402, F401 - reads of budgets
