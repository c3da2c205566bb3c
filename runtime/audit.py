"""Writing the append-only, hash-chained audit trail (verifying and reading it is
runtime/trail/).

Rows are linked and hashed by a PostgreSQL trigger (its current definition:
runtime/sql/schema/steward_audit_link.sql), so this module only says what happened. Callers write their audit row inside the same
transaction as the change it describes; many hot transitions do so inside their own
SQL statement (runtime/sql/*.sql) for the same reason.
"""

from __future__ import annotations

import contextlib
import json
from contextvars import ContextVar
from dataclasses import dataclass

from django.db.models import CharField, Func, UUIDField, Value

from runtime import db


def chain_of(*, task_id=None, tenant: str) -> Func:
    """The chain a task's events (or, with no task, a tenant's) are in, as an expression
    for a query: steward_audit_chain() in the database is the one definition of a chain
    name (migration 0007), and the link trigger uses it to file every row."""
    return Func(
        Value(task_id, output_field=UUIDField()),
        Value(tenant),
        function="steward_audit_chain",
        output_field=CharField(),
    )


# How the action being audited reached Steward, for every event written while it runs:
# {"channel": "api" | "console" | "cli", "credential": "token:<prefix>" | "session:<id>"}.
# Set once per request by the web side (trail.services.acting_through), so an event a
# service writes deep inside a cascade still says which token or session carried it.
_via: ContextVar[dict | None] = ContextVar("steward_audit_via", default=None)


@contextlib.contextmanager
def acting_through(*, channel: str, credential: str = ""):
    token = _via.set({"channel": channel, **({"credential": credential} if credential else {})})
    try:
        yield
    finally:
        _via.reset(token)


def with_via(data: dict | None) -> dict:
    """`data` with the current channel and credential, if an action set them."""
    via = _via.get()
    return {**(data or {}), "via": via} if via else dict(data or {})


@db.reads("audit_insert")
@dataclass(frozen=True, slots=True)
class Appended:
    id: int  # the event's id, in order of insertion


def audit_append(*, actor: str, tenant: str, kind: str, task_id=None, data: dict | None = None) -> int:
    """Append one event and return its id. Runs on the caller's transaction."""
    row = db.fetchone(
        "audit_insert",
        {
            "actor": actor,
            "tenant": tenant,
            "task": task_id,
            "kind": kind,
            "data": json.dumps(with_via(data), default=str),
        },
        row=Appended,
    )
    return row.id
