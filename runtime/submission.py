"""Submitting tasks: validation, idempotent create and pool admission."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from runtime import agents, config, db, dispatch, encoding
from runtime.errors import IdempotencyConflict, InputTooLarge, InvalidInput, OutputTooLarge, QueueFull
from runtime.pools import default_pool_name, pool_ensure


@dataclass(frozen=True)
class Submission:
    task_id: uuid.UUID
    created: bool  # False: the caller's idempotency key matched an existing task
    status: str


def task_submit(*, agent: str, input, tenant: str, owner: str, actor: str,
                idempotency_key: str | None = None, pool: str | None = None) -> Submission:
    """Create a task, or return the one this caller key already made.

    1. Validate the agent name and the input (a JSON object within MAX_INPUT_BYTES,
       and the agent's input_schema if it has one).
    2. In one statement (steward_submit, runtime/sql/submit_function.sql): lock the
       pool row, look up the caller key, check admission, insert the task and its
       audit row. Same key with the same agent and input returns the existing task
       whatever its status (a cancelled task stays cancelled); a different one raises
       IdempotencyConflict; a full pool raises QueueFull.
    3. Wake a worker after commit, unless the pool's free slots are already spoken for.
    """
    spec = agents.get(agent)
    _check_identity(tenant=tenant, owner=owner, key=idempotency_key)
    input_text, digest = validate_input(spec, input)
    return insert_task(
        agent=agent, input_text=input_text, digest=digest,
        tenant=tenant, owner=owner, pool=pool or spec.pool or default_pool_name(), actor=actor,
        key=idempotency_key,
    )


def insert_task(*, agent: str, input_text: str, digest: str, tenant: str, owner: str, pool: str,
                actor: str, key: str | None = None, parent_id=None, root_id=None,
                spawn_seq: int | None = None) -> Submission:
    """Run steward_submit on the caller's transaction (or autocommit) and map its outcome."""
    params = {
        # None: steward_submit mints a time-ordered id from its own clock (runtime/ids.py).
        "id": None, "agent": agent, "input": input_text, "digest": digest, "tenant": tenant,
        "owner": owner, "pool": pool, "key": key, "actor": actor, "parent": parent_id,
        "root": root_id, "spawn_seq": spawn_seq,
        # What was asked for, as evidence (the task row is not hashed); absent, not null,
        # when there is no caller key or no parent.
        "audit": json.dumps({"agent": agent, "pool": pool, "owner": owner,
                             **({"key": key} if key is not None else {}),
                             **({"parent": str(parent_id)} if parent_id else {})}),
    }
    outcome, found_id, status, admitted, max_running, max_queued, wake = db.fetchone("submit", params)
    if outcome == "no_pool":  # first use of this pool name: create it, then submit again
        pool_ensure(pool)
        outcome, found_id, status, admitted, max_running, max_queued, wake = db.fetchone("submit", params)
    if outcome == "conflict":
        raise IdempotencyConflict(f"idempotency key {key!r} was already used for a different agent or input",
                                  task_id=str(found_id))
    if outcome == "queue_full":
        raise QueueFull(
            f"pool {pool!r} is full: {admitted} tasks running or queued, "
            f"limit {max_running} running + {max_queued} queued",
            pool=pool, admitted=admitted, max_running=max_running, max_queued=max_queued,
        )
    if wake:
        dispatch.pool_has_work(pool)
    return Submission(found_id, outcome == "created", status)


def validate_input(spec: agents.AgentSpec, value) -> tuple[str, str]:
    """The input's JSON text and the digest that identifies (agent, input) for caller
    keys, or InvalidInput / InputTooLarge saying what is wrong."""
    if not isinstance(value, dict):
        raise InvalidInput(f"input must be a JSON object, got {type(value).__name__}")
    limit = config.max_input_bytes()
    try:
        text = encoding.encode(value, what="input", limit=limit)
        # The digest's canonical form sorts keys: {1: ..., "b": ...} encodes, but cannot
        # be sorted, and must fail here as INVALID_INPUT rather than as a TypeError later.
        digest = encoding.digest({"agent": spec.name, "input": value})
    except OutputTooLarge:
        raise InputTooLarge(f"input is larger than {limit} bytes (STEWARD_MAX_INPUT_BYTES)", limit=limit) from None
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"input is not plain JSON: {exc}") from None
    if spec.input_schema is not None:
        try:
            spec.input_schema.model_validate(value)
        except Exception as exc:  # pydantic.ValidationError; runtime does not import pydantic
            errors = exc.errors(include_url=False) if hasattr(exc, "errors") else str(exc)
            raise InvalidInput(f"input does not match {spec.name}'s schema",
                               errors=json.loads(json.dumps(errors, default=str))) from None
    return text, digest


def _check_identity(*, tenant: str, owner: str, key: str | None) -> None:
    for field, value, limit in (("tenant", tenant, 100), ("owner", owner, 200)):
        if not isinstance(value, str) or not value or len(value) > limit:
            raise InvalidInput(f"{field} must be 1-{limit} characters", field=field)
    if key is not None and (not isinstance(key, str) or not key or len(key) > 200):
        raise InvalidInput("idempotency key must be 1-200 characters", field="idempotency_key")
