"""Writing the append-only, hash-chained audit trail (verifying and reading it is
runtime/trail/).

Rows are linked and hashed by a PostgreSQL trigger (migration 0006 holds its current
definition), so this module only says what happened. Callers write their audit row inside the same
transaction as the change it describes; many hot transitions do so inside their own
SQL statement (runtime/sql/*.sql) for the same reason.
"""

from __future__ import annotations

import json

from runtime import db


def chain_for(*, task_id=None, tenant: str) -> str:
    return f"task:{task_id}" if task_id else f"tenant:{tenant}"


def audit_append(*, actor: str, tenant: str, kind: str, task_id=None, data: dict | None = None) -> int:
    """Append one event and return its id. Runs on the caller's transaction."""
    row = db.fetchone(
        "audit_insert",
        {
            "chain": chain_for(task_id=task_id, tenant=tenant),
            "actor": actor,
            "tenant": tenant,
            "task": task_id,
            "kind": kind,
            "data": json.dumps(data or {}, default=str),
        },
    )
    return row[0]
