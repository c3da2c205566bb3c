"""What a statement reads, from PostgreSQL's own account (EXPLAIN ANALYZE): for tests
that a cost follows the work and not the size of a table."""

from __future__ import annotations

import json

from django.db import connection


def explain(sql: str, params=None) -> dict:
    """The executed plan of `sql` (run for real, inside the caller's transaction)."""
    with connection.cursor() as cur:
        cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        (plan,) = cur.fetchone()
    return (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]


def rows_read(plan: dict, relation: str) -> int:
    """Rows that scan nodes on `relation` returned, summed over every loop, plus the rows
    they read and threw away (a filter's or a recheck's): the work done on that table."""
    total = 0
    if plan.get("Relation Name") == relation:
        loops = plan.get("Actual Loops", 1)
        kept = plan.get("Actual Rows", 0) * loops
        removed = plan.get("Rows Removed by Filter", 0) + plan.get("Rows Removed by Index Recheck", 0)
        total += kept + removed
    for child in plan.get("Plans", []):
        total += rows_read(child, relation)
    return total


def node_types(plan: dict) -> set[str]:
    found = {plan["Node Type"]}
    for child in plan.get("Plans", []):
        found |= node_types(child)
    return found
