"""Writing the append-only, hash-chained audit trail (verifying and reading it is
runtime/trail/).

Rows are linked and hashed by a PostgreSQL trigger (migration 0006 holds its current
definition), so this module only says what happened. Callers write their audit row inside the same
transaction as the change it describes; many hot transitions do so inside their own
SQL statement (runtime/sql/*.sql) for the same reason.
"""

from __future__ import annotations

import json

from django.db.models import CharField, Func, UUIDField, Value

from runtime import db


def chain_of(*, task_id=None, tenant: str) -> Func:
    """The chain a task's events (or, with no task, a tenant's) are in, as an expression
    for a query: steward_audit_chain() in the database is the one definition of a chain
    name (migration 0007), and the link trigger uses it to file every row."""
    return Func(Value(task_id, output_field=UUIDField()), Value(tenant), function="steward_audit_chain",
                output_field=CharField())


def audit_append(*, actor: str, tenant: str, kind: str, task_id=None, data: dict | None = None) -> int:
    """Append one event and return its id. Runs on the caller's transaction."""
    row = db.fetchone(
        "audit_insert",
        {
            "actor": actor,
            "tenant": tenant,
            "task": task_id,
            "kind": kind,
            "data": json.dumps(data or {}, default=str),
        },
    )
    return row[0]
