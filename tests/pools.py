"""Giving a test the pool it needs: created if missing (pools are never created
implicitly, runtime/limits/services.py), its limits set if it exists. Both are audited, as any
operator's would be."""

from __future__ import annotations

from runtime.limits.services import pool_create, pool_set_limits
from runtime.models import Pool


def pool_with(name: str, *, max_running: int, max_queued: int, actor: str = "user:alice") -> Pool:
    if Pool.objects.filter(name=name).exists():
        return pool_set_limits(name=name, actor=actor, max_running=max_running, max_queued=max_queued)
    return pool_create(name=name, max_running=max_running, max_queued=max_queued, actor=actor)
