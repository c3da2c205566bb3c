"""The Redis keys an erasure reaches (registry.REDIS_PLACES): found by pattern with
SCAN (never KEYS, which blocks the server), deleted after the erasure commits."""

from __future__ import annotations

import re
from functools import cache

import redis
from django.conf import settings

from runtime.lifecycle.registry import REDIS_PLACES

TIMEOUT_SECONDS = 2.0
_GLOB = re.compile(r"([\\*?\[\]])")


@cache
def _client() -> redis.Redis:
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=TIMEOUT_SECONDS, socket_connect_timeout=TIMEOUT_SECONDS
    )


def keys(subject) -> list[str]:
    """The subject's keys now, sorted: what the preview shows and the receipt records."""
    found: set[str] = set()
    for place in REDIS_PLACES:
        if subject.kind not in place.subjects:
            continue
        # A tenant's name is matched literally: its glob characters are escaped.
        pattern = place.pattern.format(tenant=_GLOB.sub(r"\\\1", subject.tenant))
        found.update(k.decode() for k in _client().scan_iter(match=pattern, count=1000))
    return sorted(found)


def delete(names: list[str]) -> None:
    for i in range(0, len(names), 500):
        _client().delete(*names[i : i + 500])
