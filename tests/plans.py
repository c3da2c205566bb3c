"""What a statement reads, from PostgreSQL's own account (EXPLAIN ANALYZE): for tests
that a cost follows the work and not the size of a table."""

from __future__ import annotations

import json
import re

from django.db import connection, transaction

# A partition's name: its table's, then its day, or legacy or default (migration 0032).
PARTITION = re.compile(r"(?P<table>.+)_(p\d{8}|legacy|default)")


def _partition_of(name: str, relation: str) -> bool:
    found = PARTITION.fullmatch(name)
    return found is not None and found["table"] == relation


def explain(sql: str, params=None, *, as_if_large: bool = False) -> dict:
    """The executed plan of `sql` (run for real, inside the caller's transaction).

    `as_if_large`: a test's table of a few dozen rows may rightly be read whole, by a
    sequential scan or a bitmap scan and a sort, whenever autovacuum's statistics say it
    is small; the question is then whether an index lets the statement stop at its bound,
    as the planner would have it do on a table of millions. Those two ways are priced
    out for this statement alone (SET LOCAL, in a savepoint); a statement no index serves
    still reads every row."""
    with transaction.atomic(), connection.cursor() as cur:
        if as_if_large:
            cur.execute("SET LOCAL enable_seqscan = off")
            cur.execute("SET LOCAL enable_bitmapscan = off")
        cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        (plan,) = cur.fetchone()
        if as_if_large:
            cur.execute("RESET enable_seqscan")
            cur.execute("RESET enable_bitmapscan")
    return (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]


def rows_read(plan: dict, relation: str) -> int:
    """Rows that scan nodes on `relation` returned, summed over every loop, plus the rows
    they read and threw away (a filter's or a recheck's): the work done on that table, its
    partitions' included (migration 0032: a daily, a legacy and a default partition)."""
    total = 0
    if plan.get("Relation Name") == relation or _partition_of(plan.get("Relation Name", ""), relation):
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
