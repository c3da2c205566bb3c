"""Pools: occupancy and limits. Pools are fleet-wide, shared by every tenant's tasks, so
any member sees them and an operator may change their limits (docs/api.md)."""

from __future__ import annotations

from datetime import datetime

from ninja import Path, Router, Schema
from pydantic import Field

from console.api.auth import operating
from console.api.errors import refuses
from console.api.schemas import Body, Int, JsonInt, Page, PoolName, bounded, cursor_query, limit_query, page_of
from runtime.errors import ArgumentOutOfRange, Forbidden, InvalidInput, UnknownPool
from runtime.limits.selectors import pool_usage, pool_usage_of
from runtime.limits.services import pool_set_limits

router = Router(tags=["pools"])


class PoolOut(Schema):
    name: str
    max_running: int
    max_queued: int
    running: int = Field(description="tasks holding a slot now")
    queued: int = Field(description="admitted tasks waiting for a slot (queue depth)")
    slots_held: int = Field(description="slots held by attempts, including past a lowered max_running")
    created_at: datetime | None


Running = bounded(JsonInt, ge=1)
Queued = bounded(JsonInt, ge=0)


class Limits(Body):
    max_running: Running | None = Field(None, description="running places; bounded by STEWARD_POOL_MAX_RUNNING")
    max_queued: Queued | None = Field(None, description="queued places; bounded by STEWARD_POOL_MAX_QUEUED")


def pool_out(usage) -> dict:
    pool = usage.pool
    return {
        "name": pool.name,
        "max_running": pool.max_running,
        "max_queued": pool.max_queued,
        "running": usage.running,
        "queued": usage.queued,
        "slots_held": usage.slots_held,
        "created_at": pool.created_at,
    }


@router.get("/pools", response={200: Page[PoolOut]}, summary="Pools by name, with occupancy")
@refuses(InvalidInput)
def list_pools(request, cursor: str | None = cursor_query(), limit: Int = limit_query()):
    return page_of(pool_usage(after=cursor, limit=limit), pool_out)


@router.patch("/pools/{name}", response={200: PoolOut}, summary="Change a pool's limits")
@refuses(Forbidden, UnknownPool, ArgumentOutOfRange)
def set_limits(request, body: Limits, name: PoolName = Path(...)):
    """Growing max_running adds free slots at once; shrinking lets held slots finish. An
    unknown pool is UNKNOWN_POOL (404); a limit past its bound is ARGUMENT_OUT_OF_RANGE."""
    with operating(request) as who:
        pool_set_limits(name=name, actor=who.actor, max_running=body.max_running, max_queued=body.max_queued)
    return pool_out(pool_usage_of(name))
