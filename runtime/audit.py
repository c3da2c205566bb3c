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
from enum import StrEnum

from django.db.models import CharField, Func, UUIDField, Value

from runtime import db


class AuditKind(StrEnum):
    """Every kind of audit event, the one catalogue: what Python appends (audit_append,
    trail.services.audit_record) and what the statements and database functions insert
    (runtime/sql/). docs/api.md lists each with this comment as its meaning, and
    tests/runtime/test_one_source.py holds every writer, Python or SQL, to this list."""

    # A task's life (its chain, task:<id>)
    TASK_SUBMITTED = "task.submitted"  # admitted to its pool (steward_submit(), a spawn's child too)
    TASK_COMPLETED = "task.completed"  # the agent returned: its attempt ended complete
    TASK_FAILED = "task.failed"  # the agent raised, or replay was nondeterministic
    TASK_SLEEPING = "task.sleeping"  # ctx.sleep(): the attempt ended until its wake time
    TASK_WAITING = "task.waiting"  # ctx.wait(): the attempt ended until its children finish
    TASK_BLOCKED = "task.blocked"  # waits for a person: data.blocked_reason says which act releases it
    TASK_QUEUED = "task.queued"  # an attempt yielded on a database error: queued for a retry
    TASK_DEAD = "task.dead"  # its worker died MAX_CRASHES times in a row (or a yield past them)
    TASK_RECOVERED = "task.recovered"  # its lease expired: the supervisor queued it again
    TASK_WOKEN = "task.woken"  # its timer was due, or its children finished
    TASK_RESUMED = "task.resumed"  # an operator resumed it (or lifted its tree's pause)
    TASK_UPGRADED = "task.upgraded"  # an operator moved it to another version of its agent (a dry replay passed)
    VERSION_RETIRED = "version.retired"  # an agent version with no unfinished task was retired
    TASK_UNBLOCKED = "task.unblocked"  # an operator resolved the unknown effect that blocked it
    TASK_STOPPING = "task.stopping"  # a stop closed its admission; its boundaries acknowledge
    TASK_CANCELLED = "task.cancelled"  # its stop finished with it: every boundary answered, or the bound passed
    TASK_RERUN = "task.rerun"  # a new run was made of this cancelled task (data.new_task)
    TASK_RERUN_OF = "task.rerun_of"  # this task is a new run of a cancelled one (data.old_task)
    TASK_PAUSE_CLOSED = "task.pause_closed"  # a stop left its paused tree nothing to hold (root's chain)
    WRITE_REFUSED = "write.refused"  # the fence refused a write of an attempt that no longer holds its task
    # Attempts
    ATTEMPT_STARTED = "attempt.started"  # a worker claimed the task: a new attempt and its lease
    ATTEMPT_STOPPED = "attempt.stopped"  # a superseded attempt's worker stopped running agent code
    ATTEMPT_ABANDONED = "attempt.abandoned"  # the sweep ended an attempt whose worker vanished, freeing its slot
    # Effects (the ledger)
    EFFECT_INTENT = "effect.intent"  # an effect's intent recorded before the call
    EFFECT_RESENT = "effect.resent"  # an effect sent again under its key by a later attempt
    EFFECT_COMMITTED = "effect.committed"  # the service answered; its receipt recorded
    EFFECT_FAILED = "effect.failed"  # the service said it did not perform the action
    EFFECT_PARTIAL = "effect.partial"  # a boundary cut the call after part of the answer
    EFFECT_UNKNOWN = "effect.unknown"  # its outcome cannot be known safely: the task is blocked
    EFFECT_RESOLVED = "effect.resolved"  # an operator settled an unknown effect
    # Authority and approvals
    AUTHZ_DENIED = "authz.denied"  # authorize() denied an action (the decision row names why)
    GRANT_CREATED = "grant.created"  # a person granted an action on a resource
    GRANT_NARROWED = "grant.narrowed"  # a person narrowed a grant
    GRANT_REVOKED = "grant.revoked"  # a person revoked a grant
    APPROVAL_APPROVED = "approval.approved"  # a person approved a package
    APPROVAL_DENIED = "approval.denied"  # a person denied a package
    APPROVAL_EXPIRED = "approval.expired"  # nobody decided before its expiry: expiry means deny
    APPROVAL_STALE = "approval.stale"  # what the package is bound to changed: found at the approve or the re-check
    APPROVAL_CONSUMED = "approval.consumed"  # the re-check found it unchanged: the agent acts on it, once
    # Agent memory (runtime/memory/)
    MEMORY_WRITTEN = "memory.written"  # an agent or a person wrote a new version of a memory record
    MEMORY_UPGRADED = "memory.upgraded"  # a record's payload was upgraded to its kind's next schema version
    MEMORY_ROLLED_BACK = "memory.rolled_back"  # a person made an earlier version current again (data.effects_since)
    # Stops and the kill switch (a tenant's chain)
    AGENT_STOPPED = "agent.stopped"  # the kill switch closed an agent's submission and stopped its tasks
    AGENT_REOPENED = "agent.reopened"  # an agent's submission opened again
    # Pools, budgets and quotas
    POOL_CREATED = "pool.created"  # a pool was made (by an operator, or on first use)
    POOL_LIMITS = "pool.limits"  # a pool's limits changed
    POOL_REMOVED = "pool.removed"  # a pool was removed
    BUDGET_SET = "budget.set"  # a tenant's token budgets changed
    QUOTA_SET = "quota.set"  # a service quota was set
    QUOTA_REMOVED = "quota.removed"  # a service quota was removed
    # Lifecycle: retention and erasure (runtime/lifecycle/; a tenant's chain)
    RETENTION_SET = "retention.set"  # a tenant's retention periods changed (data.before, data.after)
    RETENTION_RAN = "retention.ran"  # the retention job erased a tenant's payloads past their period (data.rows)
    ERASURE_COMPLETED = "erasure.completed"  # payloads of a subject were erased (data.receipt names the signed receipt)
    # Triggers
    SCHEDULE_CREATED = "schedule.created"  # a cron schedule was made
    SCHEDULE_PAUSED = "schedule.paused"  # a schedule was paused
    SCHEDULE_RESUMED = "schedule.resumed"  # a schedule was resumed
    SCHEDULE_FIRED = "schedule.fired"  # a tick submitted its task
    SCHEDULE_MISSED = "schedule.missed"  # ticks passed while nothing fired them (the missed policy)
    SCHEDULE_OVERLAP_SKIPPED = "schedule.overlap_skipped"  # a tick was dropped: the previous run was still live
    SCHEDULE_REFUSED = "schedule.refused"  # a tick's submission was refused
    WEBHOOK_CREATED = "webhook.created"  # a webhook trigger was made
    WEBHOOK_PAUSED = "webhook.paused"  # a webhook was paused
    WEBHOOK_RESUMED = "webhook.resumed"  # a webhook was resumed
    WEBHOOK_DELIVERED = "webhook.delivered"  # a signed delivery submitted its task
    DEPENDENCY_CREATED = "dependency.created"  # a dependency trigger was made
    DEPENDENCY_FIRED = "dependency.fired"  # its prerequisites finished: it submitted its task
    DEPENDENCY_SKIPPED = "dependency.skipped"  # a prerequisite failed or was cancelled (on_failure skip)
    DEPENDENCY_FAILED = "dependency.failed"  # a prerequisite failed (on_failure fail), or its submission was refused
    # People and credentials (the web side)
    TOKEN_CREATED = "token.created"  # an API token was made
    TOKEN_REVOKED = "token.revoked"  # an API token was revoked
    MEMBER_ADDED = "member.added"  # a person joined a tenant
    MEMBER_ROLE = "member.role"  # a member's role changed
    MEMBER_REMOVED = "member.removed"  # a person left a tenant
    AGENT_STEWARD_ADDED = "agent.steward_added"  # an operator was given the right over one agent's grants
    AGENT_STEWARD_REMOVED = "agent.steward_removed"  # an operator's right over one agent's grants was taken
    SIGNIN_LOCKED_OUT = "signin.locked_out"  # sign-in was locked for an account or an address (django-axes)
    # Workers' credentials and the tokens minted for them (the fleet's chain; a mint, the task's)
    WORKER_CREDENTIAL_CREATED = "worker_credential.created"  # an operator made a worker's credential
    WORKER_CREDENTIAL_REVOKED = "worker_credential.revoked"  # an operator revoked one: it mints nothing more
    TOKEN_MINTED = "capability.minted"  # the minting service gave a worker a token for an attempt it holds
    TOKEN_REFUSED = "capability.refused"  # the minting service refused a worker a token (data.reason says why)
    # Bounded growth (the system tenant's chain: a partition holds every tenant's rows)
    PARTITIONS_ENSURED = "partitions.ensured"  # the daily job created partitions ahead (data.partitions)
    PARTITION_DROPPED = "partition.dropped"  # retention dropped whole partitions (data.kept: why not others)
    AUDIT_ARCHIVED = "audit.archived"  # an audit partition was written out as JSON lines with its seals


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


def audit_append(*, actor: str, tenant: str, kind: AuditKind, task_id=None, data: dict | None = None) -> int:
    """Append one event and return its id. Runs on the caller's transaction."""
    row = db.fetchrow(
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


def audit_append_many(events: list[dict]) -> None:
    """Append several events, each {actor, tenant, task_id, kind, data}, in one statement
    (runtime/sql/audit_insert_many.sql). Runs on the caller's transaction."""
    if not events:
        return
    db.execute(
        "audit_insert_many",
        {
            "actors": [e["actor"] for e in events],
            "tenants": [e["tenant"] for e in events],
            "tasks": [e.get("task_id") for e in events],
            "kinds": [e["kind"] for e in events],
            "datas": [json.dumps(with_via(e.get("data")), default=str) for e in events],
        },
    )
