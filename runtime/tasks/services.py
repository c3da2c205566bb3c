"""Tasks: submitting them (validation, idempotent create, pool admission), and what an
operator does to one (resume; stopping is runtime/stops/)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import psycopg
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now

from runtime import agents, arguments, config, db, encoding, states
from runtime.attempts import dispatch
from runtime.audit import AuditKind, audit_append, with_via
from runtime.errors import (
    AgentStopped,
    IdempotencyConflict,
    InvalidInput,
    InvalidTransition,
    QueueFull,
    UnknownAgent,
    VersionNotServed,
    VersionRetired,
)
from runtime.limits import pauses
from runtime.limits.services import default_pool_name, first_use_reason, pool_create_on_first_use, unknown_pool
from runtime.models import Task
from runtime.tasks.actions import RESUMABLE_BLOCKS
from runtime.tasks.selectors import task_get

# What migration 0014's trigger raises for a task of an agent whose kill switch is closed.
AGENT_STOPPED_SQLSTATE = "SW001"


@dataclass(frozen=True)
class Submission:
    task_id: uuid.UUID
    created: bool  # False: the caller's idempotency key matched an existing task
    status: str


def task_submit(
    *,
    agent: str,
    input,
    tenant: str,
    owner: str,
    actor: str,
    idempotency_key: str | None = None,
    pool: str | None = None,
    version: str | None = None,
) -> Submission:
    """Create a task, or return the one this caller key already made.

    1. Check the identifiers against their columns (INVALID_IDENTIFIER), the agent name
       against the registry, and the input (a JSON object within the limits of
       docs/limits.md, and the agent's input model if it declares one: `@agent(..., input=Model)`).
    2. In one statement (steward_submit(), runtime/sql/schema/steward_submit.sql): lock the
       pool row, look up the caller key, check admission, insert the task and its
       audit row. Same key with the same agent and input returns the existing task
       whatever its status (a cancelled task stays cancelled); a different one raises
       IdempotencyConflict; a full pool raises QueueFull; a pool that does not exist
       raises UnknownPool, unless it is the default pool or the agent's declared pool,
       which are created on first use (audited).
    3. Wake a worker after commit, unless the pool's free slots are already spoken for.

    `version`: pin the task to that version of the agent, which must be served here
    (VERSION_NOT_SERVED) and not retired (VERSION_RETIRED); by default none is fixed
    until the task starts (docs/adr/0037-agent-versions.md).
    """
    spec = agents.get(arguments.agent_name(agent))
    if version is not None:
        try:
            spec = agents.get(agent, version)
        except UnknownAgent:
            raise VersionNotServed(
                f"agent {agent!r} version {version!r} is not deployed here", agent=agent, version=version
            ) from None
    arguments.tenant(tenant)
    arguments.actor(owner, "owner")
    arguments.actor(actor)
    arguments.idempotency_key(idempotency_key)
    if pool is not None:
        arguments.pool_name(pool)
    input_text, digest = validate_input(spec, input)
    return insert_task(
        agent=agent,
        input_text=input_text,
        digest=digest,
        tenant=tenant,
        owner=owner,
        pool=pool or spec.pool or default_pool_name(),
        actor=actor,
        key=idempotency_key,
        version=version,
    )


def insert_task(
    *,
    agent: str,
    input_text: str,
    digest: str,
    tenant: str,
    owner: str,
    pool: str,
    actor: str,
    key: str | None = None,
    parent_id=None,
    root_id=None,
    spawn_seq: int | None = None,
    requested_scope: list[dict] | None = None,
    version: str | None = None,
) -> Submission:
    """Run steward_submit on the caller's transaction (or autocommit) and map its outcome.
    A child's `requested_scope` (already checked) is set on the row it created, in the
    caller's transaction (ctx.spawn's), and named in its `task.submitted` event."""
    params = {
        # None: steward_submit mints a time-ordered id from its own clock (runtime/ids.py).
        "id": None,
        "agent": agent,
        "input": input_text,
        "digest": digest,
        "tenant": tenant,
        "owner": owner,
        "pool": pool,
        "key": key,
        "actor": actor,
        "parent": parent_id,
        "root": root_id,
        "spawn_seq": spawn_seq,
        # What was asked for, as evidence (the task row is not hashed); absent, not null,
        # when there is no caller key or no parent.
        "audit": json.dumps(
            with_via(
                {
                    "agent": agent,
                    "pool": pool,
                    "owner": owner,
                    **({"key": key} if key is not None else {}),
                    **({"parent": str(parent_id)} if parent_id else {}),
                    **({"requested_scope": requested_scope} if requested_scope is not None else {}),
                }
            )
        ),
    }
    # No version yet, unless the caller pinned one (docs/adr/0037-agent-versions.md): its
    # first claim fixes the claiming worker's current one, so a submitter left on the old
    # code never holds a deploy back.
    params["version"] = version
    done = _submit(params)
    if done.outcome == "no_pool":
        why = first_use_reason(pool, agent=agent, agent_pool=agents.get(agent).pool)
        if why is None:
            raise unknown_pool(pool)
        pool_create_on_first_use(name=pool, actor=actor, why=why)
        done = _submit(params)
        if done.outcome == "no_pool":  # removed again between the two statements (pool_remove)
            raise unknown_pool(pool)
    if done.outcome == "conflict":
        raise IdempotencyConflict(
            f"idempotency key {key!r} was already used for a different agent or input", task_id=str(done.task_id)
        )
    if done.outcome == "retired":
        raise VersionRetired(
            f"agent {agent!r} version {params['version']!r} was retired: deploy a newer version to submit it",
            agent=agent,
            version=params["version"],
        )
    if done.outcome == "queue_full":
        raise QueueFull(
            f"pool {pool!r} is full: {done.admitted} tasks running or queued, "
            f"limit {done.max_running} running + {done.max_queued} queued",
            pool=pool,
            admitted=done.admitted,
            max_running=done.max_running,
            max_queued=done.max_queued,
        )
    if requested_scope is not None and done.outcome == "created":
        # Before the child can be claimed: the caller's transaction has not committed.
        Task.objects.filter(id=done.task_id, requested_scope__isnull=True).update(requested_scope=requested_scope)
    if done.wake:
        dispatch.pool_has_work(pool)
    # Created or existing (every other outcome raised above): steward_submit names the task.
    assert done.task_id is not None and done.status is not None
    return Submission(done.task_id, done.outcome == "created", done.status)


@db.reads("submit")
@dataclass(frozen=True, slots=True)
class _Submitted:
    """What steward_submit() answers."""

    outcome: str  # created, existing, conflict, queue_full or no_pool
    task_id: uuid.UUID | None  # the task made, or the one the caller's key already made
    status: str | None  # that task's status
    admitted: int | None  # the pool's queued + running, once admission was checked
    max_running: int | None  # the pool's limits
    max_queued: int | None
    wake: bool | None  # created with a free slot to spare: send the pool a wake-up


def _submit(params: dict) -> _Submitted:
    try:
        return db.fetchrow("submit", params, row=_Submitted)
    except psycopg.Error as exc:
        if exc.sqlstate != AGENT_STOPPED_SQLSTATE:
            raise
        # The kill switch (runtime/stops/, migration 0014's trigger): nothing was inserted.
        raise AgentStopped(
            f"agent {params['agent']!r} is stopped in tenant {params['tenant']!r}: submission is "
            f"closed until an operator reopens it",
            agent=params["agent"],
        ) from None


def validate_input(spec: agents.AgentSpec, value) -> tuple[str, str]:
    """The input's JSON text and the digest that identifies (agent, input) for caller
    keys, or the StewardError saying what is wrong (runtime/encoding.py plain())."""
    if not isinstance(value, dict):
        raise InvalidInput(f"input must be a JSON object, got {type(value).__name__}")
    text = encoding.plain(value, what="input", limit=config.max_input_bytes(), setting="STEWARD_MAX_INPUT_BYTES")
    # plain() accepted it, so every key is a string and the canonical form can sort them.
    digest = encoding.digest({"agent": spec.name, "input": value})
    if spec.input_model is not None:
        try:
            spec.input_model.model_validate(value)
        except Exception as exc:  # pydantic.ValidationError; runtime does not import pydantic
            errors = exc.errors(include_url=False) if hasattr(exc, "errors") else str(exc)
            # `fields` is the same list the API's own request validation answers
            # (each failing field's location and why); `errors` is pydantic's full account.
            fields = (
                [
                    {"loc": ["input", *(str(p) for p in e.get("loc", ()))], "msg": str(e.get("msg", "invalid"))}
                    for e in errors
                ]
                if isinstance(errors, list)
                else [{"loc": ["input"], "msg": errors}]
            )
            raise InvalidInput(
                f"input does not match {spec.name}'s schema: {_schema_problems(errors)}",
                errors=json.loads(json.dumps(errors, default=str)),
                fields=fields,
            ) from None
    return text, digest


SCHEMA_PROBLEMS_SHOWN = 10


def _schema_problems(errors) -> str:
    """`question: String should have at least 1 character; experiments: ...`: each failing
    field and why, so that the caller need not read `details`. A field's name comes from
    the input (an unexpected key, say), so it is cut short and escaped for a terminal."""
    if isinstance(errors, str):
        return _printable(errors, 200)
    shown = []
    for error in errors[:SCHEMA_PROBLEMS_SHOWN]:
        where = ".".join(str(part) for part in error.get("loc", ())) or "input"
        why = str(error.get("msg", "invalid"))  # an agent's own validator may quote the input
        shown.append(f"{_printable(where, 60)}: {_printable(why, 200)}")
    more = len(errors) - SCHEMA_PROBLEMS_SHOWN
    return "; ".join(shown) + (f"; and {more} more (details.errors)" if more > 0 else "")


def _printable(text: str, width: int) -> str:
    return text if len(text) <= width and text.isprintable() else repr(text[:width])


# --- what an operator does to a task: each a durable transaction that takes actor=, makes
# conditional writes and audits them in the same transaction; not callable from agent code.


@dataclass(frozen=True)
class Resumed:
    """What a resume did beyond its own task: the tree pause it lifted, if any."""

    pause_id: int | None = None
    tree_queued: int = 0  # the other tasks of the tree the lifted pause had held, queued again


def task_resume(*, task_id, actor: str, note: str = "", limits: dict | None = None) -> Resumed:
    """Queue a dead, failed, cancelled, denied, tripped or paused task for a new attempt
    (reason `resume`); in a paused tree, lift the pause.

    1. Check `limits` (runtime/arguments.py breaker_limits): an operator's breaker limits
       for this task alone, merged over any it had (runtime/limits/breakers.py).
    2. If its tree is paused (runtime/limits/pauses.py), lock the tree first, parents
       first, as the pause and a stop do.
    3. Refuse while the old attempt has not yet stopped (its worker has not acknowledged).
    4. One conditional UPDATE from the resume sources; from `blocked` only when it was
       blocked by a denial (authority_denied, event `resume`), a breaker (breaker_tripped,
       event `reset`) or its tree's pause (tree_paused, event `release`): a task blocked
       on an unknown effect is released by resolving that effect, never by skipping past
       it, and one waiting for an approval by its decision. A resumed task checks again
       at its next effect (authority) and its next step or spawn (breakers), so resuming
       before the grants or the limits change blocks it again on its next attempt, visibly.
    5. Lift the tree's pause: every other task it holds is queued again (`release`).
    6. Audit `task.resumed` (with what had blocked it, the limits set and the pause
       lifted) in the transaction.
    """
    arguments.actor(actor)
    arguments.text("note", note)
    raised = arguments.breaker_limits(limits) if limits is not None else None
    with transaction.atomic(durable=True):
        task = task_get(arguments.task_id(task_id))
        paused = pauses.open_pause(task.root_id) is not None
        if paused:
            pauses.tree_lock(task.root_id)
        if task.attempts.filter(ended_at__isnull=True).exists():
            raise InvalidTransition(
                f"task {task.id} still has a running attempt; wait for it to stop", status=task.status
            )
        resumable = ~Q(status=states.BLOCKED) | Q(blocked_reason__in=RESUMABLE_BLOCKS)
        overrides = {**(task.breaker_limits or {}), **raised} if raised else task.breaker_limits
        # The row read above may be stale by now; the UPDATE's WHERE decides. The limits
        # are merged over those read, so it also requires them unchanged: another
        # operator's resume (which then ran, and tripped again) may have set some.
        unchanged = (
            Q(breaker_limits__isnull=True) if task.breaker_limits is None else Q(breaker_limits=task.breaker_limits)
        )
        won = Task.objects.filter(
            resumable, unchanged, id=task.id, status__in=states.sources(states.TaskEvent.RESUME)
        ).update(
            status=states.QUEUED,
            next_reason=states.RESUME,
            crash_count=0,
            queued_at=Now(),
            finished_at=None,
            status_note=f"resumed by {actor}",
            updated_at=Now(),
            blocked_reason=None,
            blocked_decision=None,
            breaker=None,
            breaker_limits=overrides,
            stop=None,
            stop_deadline=None,
        )
        if not won:
            # Another operator (a resume, a cancel, a resolve) or the worker moved it first,
            # or it is blocked on an unknown effect: read again for the refusal.
            now = Task.objects.filter(id=task.id).values("status", "blocked_reason").get()
            if now["status"] == states.BLOCKED and now["blocked_reason"] == states.EFFECT_UNKNOWN:
                raise InvalidTransition(
                    f"task {task.id} is blocked on an unknown effect; resolve the effect "
                    f"(resolve-effect) instead of resuming",
                    status=now["status"],
                    blocked_reason=now["blocked_reason"],
                )
            if now["status"] == states.BLOCKED and now["blocked_reason"] not in RESUMABLE_BLOCKS:
                raise InvalidTransition(
                    f"task {task.id} is blocked ({now['blocked_reason']}); its decision releases it, not a resume",
                    status=now["status"],
                    blocked_reason=now["blocked_reason"],
                )
            raise InvalidTransition(
                f"task {task.id} is {now['status']}; resume starts from {', '.join(states.sources(states.TaskEvent.RESUME))}",
                status=now["status"],
            )
        blocked = {}
        if task.status == states.BLOCKED:
            blocked = {
                "blocked_reason": task.blocked_reason,
                **({"decision_id": str(task.blocked_decision_id)} if task.blocked_decision_id else {}),
                **({"breaker": task.breaker} if task.breaker else {}),
            }
        lifted = pauses.tree_release(root_id=task.root_id, task_id=task.id, actor=actor, note=note) if paused else None
        audit_append(
            actor=actor,
            tenant=task.tenant,
            task_id=task.id,
            kind=AuditKind.TASK_RESUMED,
            data={
                "from": task.status,
                "note": note,
                **blocked,
                **({"limits": raised} if raised else {}),
                **({"tree_pause_lifted": lifted.pause_id, "tree_queued": lifted.queued} if lifted else {}),
            },
        )
        dispatch.pool_has_work(task.pool_id)
    return Resumed(lifted.pause_id, lifted.queued) if lifted else Resumed()


def input_parse(text: str | bytes):
    """A task input typed as JSON text (the console's form): parsed as the CLI parses
    --input, refusing text too large or too deep before it can cost a RecursionError,
    and then checked by task_submit like any input."""
    return encoding.parse(text, what="input", limit=config.max_input_bytes(), setting="STEWARD_MAX_INPUT_BYTES")
