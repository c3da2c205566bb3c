"""Outside services' call quotas, counted fleet-wide in Redis.

A quota is configured in PostgreSQL (steward_quota: a tenant, a service, `calls` per
`window_seconds`); Redis only counts. Each call to a service with a quota takes one
from its current fixed window, in one Lua script (INCR, EXPIRE on the window's first
call) on Redis's own clock (TIME), so every web process on every host counts into the
same window: INCR is atomic, so exactly `calls` takers see a count within the quota.

If Redis cannot be reached, a call to a service with a quota is refused
(quota_unavailable): it fails closed. A quota exists to protect a provider's limit or
bill, and a fall-back count in PostgreSQL per call would put a write on the hot path of
every process at once, exactly when Redis is down (docs/adr/0019-budgets.md). Services
without a quota never touch Redis.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import cache

import redis
from django.conf import settings

from runtime.models import Quota

KEY = "steward:quota:{tenant}:{service}"
TIMEOUT_SECONDS = 0.5  # a Redis that does not answer in this long is down, for a quota
UNAVAILABLE_RETRY_SECONDS = 1

# KEYS[1]: the quota's key; ARGV[1]: the window in seconds. Returns {count, seconds
# until the window ends, the window's start}. The window's key is KEYS[1] plus the window's start, and
# expires a second after the window ends: no sweep is needed.
TAKE = """
local now = tonumber(redis.call('TIME')[1])
local window = tonumber(ARGV[1])
local start = now - (now % window)
local key = KEYS[1] .. ':' .. start
local n = redis.call('INCR', key)
if n == 1 then redis.call('EXPIRE', key, window + 1) end
return {n, start + window - now, start}
"""
GIVE = "local n = redis.call('GET', KEYS[1]) if n and tonumber(n) > 0 then redis.call('DECR', KEYS[1]) end return 0"


@dataclass(slots=True)
class Taken:
    """A quota's verdict on one call: None (within it, or no quota), quota_exceeded or
    quota_unavailable; and when to try again."""

    reason: str | None
    retry_after: int | None = None
    calls: int | None = None
    window_seconds: int | None = None
    key: str | None = None  # the window's key, to give the call back if it is not admitted


@cache
def _client() -> redis.Redis:
    return redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=TIMEOUT_SECONDS,
        socket_connect_timeout=TIMEOUT_SECONDS,
        retry_on_timeout=False,
    )


@cache
def _take():
    return _client().register_script(TAKE)


def quota_take(*, tenant: str, service: str) -> Taken:
    """Take one call from the tenant's quota for `service`, if it has one.

    1. Read the quota from PostgreSQL (one primary-key-sized index read): a change is in
       force for the next call, in every process.
    2. Count the call into the current window in Redis (one round trip); past `calls`,
       quota_exceeded, retry when the window ends. Redis unreachable: quota_unavailable.
    """
    quota = Quota.objects.filter(tenant=tenant, service=service).values_list("calls", "window_seconds").first()
    if quota is None:
        return Taken(None)
    calls, window = quota
    key = KEY.format(tenant=tenant, service=service)
    try:
        count, left, start = _take()(keys=[key], args=[window])
    except redis.RedisError:
        return Taken("quota_unavailable", UNAVAILABLE_RETRY_SECONDS, calls, window)
    if int(count) <= calls:
        # The window's own key, to give back a call that is then denied (quota_give).
        return Taken(None, None, calls, window, f"{key}:{int(start)}")
    return Taken("quota_exceeded", max(1, int(left)), calls, window)


def quota_give(taken: Taken) -> None:
    """Give back a call that was counted but not admitted (denied for another reason,
    a replay, a busy key), so it does not use the window up. Best effort: if Redis went
    away, the window is only tighter than it needed to be, never looser."""
    if taken.key is None:
        return
    with contextlib.suppress(redis.RedisError):
        _client().eval(GIVE, 1, taken.key)
