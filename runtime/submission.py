"""Submitting tasks: validation, idempotent create and pool admission."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from django.db import transaction

from runtime import agents, config, db, dispatch, encoding
from runtime.errors import IdempotencyConflict, InputTooLarge, InvalidInput, OutputTooLarge
from runtime.pools import admit, default_pool_name, pool_ensure


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
    2. Lock the pool row: admission and key look-up are serialised per pool.
    3. Same key: same agent and input returns the existing task, whatever its status
       (a cancelled task stays cancelled); different ones raise IdempotencyConflict.
    4. Refuse with QueueFull if the pool is at max_running + max_queued.
    5. Insert the task and its audit row in one statement; wake a worker after commit.
    """
    spec = agents.get(agent)
    _check_identity(tenant=tenant, owner=owner, key=idempotency_key)
    input_text = validate_input(spec, input)
    digest = encoding.digest({"agent": agent, "input": input})
    pool_name = pool or spec.pool or default_pool_name()
    pool_ensure(pool_name)
    with transaction.atomic(durable=True):
        cur = db.cursor()
        cur.execute(db.sql("pool_lock"), {"pool": pool_name}, prepare=True)
        if idempotency_key is not None:
            existing = _by_key(cur, tenant, idempotency_key, digest)
            if existing is not None:
                return existing
        admit(cur, pool_name)
        task_id = insert_task(
            cur, agent=agent, input_text=input_text, digest=digest, tenant=tenant, owner=owner,
            pool=pool_name, actor=actor, key=idempotency_key,
        )
        if task_id is None:
            # Same key inserted concurrently through another pool: theirs stands.
            return _by_key(cur, tenant, idempotency_key, digest)
        dispatch.pool_has_work(pool_name)
        return Submission(task_id, True, "queued")


def insert_task(cur, *, agent, input_text, digest, tenant, owner, pool, actor, key=None,
                parent_id=None, root_id=None, spawn_seq=None) -> uuid.UUID | None:
    """INSERT the task and its `task.submitted` audit row; None on a unique conflict."""
    task_id = uuid.uuid4()
    row = cur.execute(
        db.sql("task_insert"),
        {
            "id": task_id, "agent": agent, "input": input_text, "digest": digest,
            "tenant": tenant, "owner": owner, "pool": pool, "parent": parent_id,
            "root": root_id, "spawn_seq": spawn_seq, "key": key, "actor": actor,
            "data": json.dumps({"agent": agent, "pool": pool, "owner": owner, "key": key,
                                "parent": str(parent_id) if parent_id else None}),
        },
        prepare=True,
    ).fetchone()
    return row[0] if row else None


def validate_input(spec: agents.AgentSpec, value) -> str:
    """The input's JSON text, or InvalidInput / InputTooLarge saying what is wrong."""
    if not isinstance(value, dict):
        raise InvalidInput(f"input must be a JSON object, got {type(value).__name__}")
    limit = config.max_input_bytes()
    try:
        text = encoding.encode(value, what="input", limit=limit)
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
    return text


def _check_identity(*, tenant: str, owner: str, key: str | None) -> None:
    for field, value, limit in (("tenant", tenant, 100), ("owner", owner, 200)):
        if not isinstance(value, str) or not value or len(value) > limit:
            raise InvalidInput(f"{field} must be 1-{limit} characters", field=field)
    if key is not None and (not isinstance(key, str) or not key or len(key) > 200):
        raise InvalidInput("idempotency key must be 1-200 characters", field="idempotency_key")


def _by_key(cur, tenant: str, key: str, digest: str) -> Submission | None:
    row = cur.execute(
        "SELECT id, input_digest, status FROM steward_task WHERE tenant = %s AND idempotency_key = %s",
        (tenant, key),
    ).fetchone()
    if row is None:
        return None
    task_id, existing_digest, status = row
    if existing_digest != digest:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was already used for a different agent or input",
            task_id=str(task_id),
        )
    return Submission(task_id, False, status)
