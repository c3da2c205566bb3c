"""The append-only, hash-chained audit trail.

Rows are linked and hashed by a PostgreSQL trigger (runtime/sql/audit_schema.sql), so
this module only says what happened. Callers write their audit row inside the same
transaction as the change it describes; many hot transitions do so inside their own
SQL statement (runtime/sql/*.sql) for the same reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Tampered:
    id: int
    chain: str
    chain_seq: int
    problem: str  # "hash": the row's content changed; "link": a row before it changed
    #                or vanished; "gap": chain_seq skips (a row was removed)

    def __str__(self):
        reasons = {
            "hash": "its content no longer matches its hash",
            "link": "its prev_hash does not match the row before it in the chain",
            "gap": "the chain skips a sequence number (a row was removed)",
        }
        return f"audit row {self.id} ({self.chain} #{self.chain_seq}): {reasons[self.problem]}"


def audit_verify() -> Tampered | None:
    """Recompute every chain. Return the first bad row by id, or None if all hold."""
    row = db.fetchone("audit_verify", {})
    return Tampered(*row) if row else None
