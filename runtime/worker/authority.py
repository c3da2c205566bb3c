"""Authority at the executor: what ctx.authorize(), ctx.effect(..., requires=...) and
ctx.spawn(..., scope=...) hand to runtime.authz, and how a denial stops the task.

A check is never journaled: a replay must not reuse an old allow, so every attempt asks
again on current rows (runtime/sql/authz_decide.sql) before its next effect. That is
how a task resumed after a sleep, a recovery or an operator's resume is held to what
its grants say now, not to what they said when it started (docs/contracts.md §2).

A denial raises AuthorityDenied naming the boundary. It is sticky (runtime/worker/context.py):
agent code that catches it cannot go on journaling, and the executor ends the attempt
`deny` whatever the agent did next, so the task is blocked with the decision on its row
(runtime/worker/executor.py). It never fails silently and is never retried by itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from runtime.authz import EXECUTOR_BOUNDARY, patterns
from runtime.authz.services import authorize, raise_if_denied
from runtime.errors import InvalidArgument
from runtime.models import Decision
from runtime.taint import refuse_untrusted


class Need(NamedTuple):
    """One action on one resource: what an effect requires, or an entry of a child's
    requested scope (where the resource may be a prefix pattern)."""

    action: str
    resource: str


def need(value, *, field: str = "requires", pattern: bool = False) -> Need:
    """(action, resource), a Need, or {"action", "resource"}, checked for form. An
    effect's resource is one value (patterns.concrete); a scope entry may be a pattern."""
    # The taint rule (runtime/taint.py): authority is never read from a model's or a
    # tool's text, nor from memory written from it.
    refuse_untrusted(value, field=field)
    if isinstance(value, Mapping):
        if set(value) != {"action", "resource"}:
            raise InvalidArgument(f"{field} is exactly {{action, resource}}", field=field)
        value = (value["action"], value["resource"])
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise InvalidArgument(f"{field} is an (action, resource) pair", field=field)
    action, resource = value
    patterns.action(action, field)
    (patterns.resource if pattern else patterns.concrete)(resource, field)
    return Need(action, resource)


def scope(value) -> list[dict] | None:
    """A child's requested scope as steward_task.requested_scope stores it: None (what
    its parent holds) or [{"action", "resource"}], from pairs, Needs or dicts."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise InvalidArgument("scope is a list of (action, resource) pairs", field="scope")
    entries = [need(entry, field="scope", pattern=True)._asdict() for entry in value]
    return patterns.scope(entries, field="scope")


def check(ctx, action: str, resource: str) -> Decision:
    """Decide on current rows at the executor boundary, recorded with this attempt's
    epoch; raise AuthorityDenied (naming the boundary, reason_code and decision_id) on a
    denial."""
    return raise_if_denied(
        authorize(task=ctx.task_id, action=action, resource=resource, boundary=EXECUTOR_BOUNDARY, epoch=ctx.epoch)
    )


def dry_allow(ctx, action: str, resource: str) -> Decision:
    """What ctx.authorize() answers in a dry replay (runtime/worker/replay.py): an allow
    that is never saved, decided by nobody; the replay writes nothing."""
    return Decision(
        tenant=ctx.tenant,
        task_id=ctx.task_id,
        epoch=ctx.epoch,
        actor=f"agent:{ctx.agent}",
        owner=ctx.owner,
        boundary=EXECUTOR_BOUNDARY,
        action=action,
        resource=resource,
        allowed=True,
        reason_code="dry_replay",
        policy_version="",
        authz_revision=0,
    )
