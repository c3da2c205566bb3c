"""The kept admission counts (steward_pool_count) against a recount of the tasks.

One statement, so both sides come from one snapshot: every transition writes its count
change in the transaction that moves the task, so the two agree in every snapshot,
even while workers are mid-transition or have just been killed.
"""

from __future__ import annotations

from django.db import connection

DRIFT_SQL = """
SELECT coalesce(k.pool, r.pool), coalesce(k.admitted, 0), coalesce(r.admitted, 0)
FROM (SELECT pool, sum(admitted) AS admitted FROM steward_pool_count GROUP BY pool) k
FULL JOIN (SELECT pool, count(*) AS admitted FROM steward_task
           WHERE status IN ('queued', 'running') GROUP BY pool) r ON r.pool = k.pool
WHERE coalesce(k.admitted, 0) <> coalesce(r.admitted, 0)
"""


def count_drift() -> dict[str, tuple[int, int]]:
    """{pool: (kept, recounted)} for every pool whose kept count is wrong; {} when exact."""
    with connection.cursor() as cur:
        cur.execute(DRIFT_SQL)
        return {pool: (int(kept), int(recounted)) for pool, kept, recounted in cur.fetchall()}


def kept_counts() -> dict[str, int]:
    with connection.cursor() as cur:
        cur.execute("SELECT pool, sum(admitted) FROM steward_pool_count GROUP BY pool")
        return {pool: int(n) for pool, n in cur.fetchall()}
