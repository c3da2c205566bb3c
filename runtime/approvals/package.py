"""What an approval package binds: the canonical action and its hash, the context digest
and the taint summary, built the same way at the request and at the re-check, so that
comparing the two says whether anything the person approved has changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from runtime import db, encoding
from runtime.authz import EXECUTOR_BOUNDARY, POLICY_VERSION, patterns
from runtime.authz.services import authorize
from runtime.errors import InvalidArgument, NotJournalable
from runtime.models import Approval
from runtime.taint import refuse_untrusted, untrusted_paths

# What a package's context binds, keyed as build() stores it, each with the words an
# operator reads it by (the console's approval pages show both: the key stays in the
# API, the audit trail and the stale reason). One list, so a key added to build() has a
# label beside it.
BOUND = {
    "input_digest": "The input",
    "precondition": "The target as the agent read it",
    "policy_version": "The policy version",
    "authz_revision": "The agent's grants",
    "requires": "The authority it needs",
}


@db.reads("approval_context")
@dataclass(frozen=True, slots=True)
class Facts:
    """What the context covers that the database holds (runtime/sql/approval_context.sql)."""

    input_digest: str
    authz_revision: int


def facts(task_id) -> Facts:
    return db.fetchrow("approval_context", {"task": task_id}, row=Facts)


class Built(NamedTuple):
    action: object  # the canonical action (a JSON round trip of the agent's)
    action_hash: str
    context: dict  # what the context digest covers, in the clear
    context_digest: str
    untrusted_paths: list[str]  # where the action holds model or tool output
    requires: tuple[str, ...] | None


class Stored(NamedTuple):
    """A package as the re-check reads it (runtime/sql/approval_read.sql)."""

    id: object
    state: str
    decided_by: str | None
    comment: str
    stale_reason: str
    action_hash: str
    context_digest: str
    context: dict


def build(ctx, action, *, facts: Facts, precondition=None, requires=None) -> Built:
    """1. The action as canonical JSON (sorted keys) and its sha256.
    2. The precondition: what the agent's callback reads of the target now (an ETag, a
       version), called on every attempt that builds the package.
    3. The context: the task's input digest, that precondition, the policy_version and
       the tenant's authz_revision, and its sha256. `facts` holds the digest and the
       revision, read by the caller in a statement it needs anyway (approval_read.sql
       at the re-check), not in two round trips of their own.
    4. The taint summary: the paths in the action whose text came from a model or a tool,
       or from memory written from them (runtime/taint.py, which says so at the path)."""
    try:
        text = encoding.encode(action, what="the action")
    except NotJournalable as exc:
        raise InvalidArgument(f"an approval's action must be JSON: {exc}", field="action") from None
    canonical = encoding.decode(text)
    current = precondition() if callable(precondition) else precondition
    try:
        current = encoding.decode(encoding.encode(current, what="the precondition"))
    except NotJournalable as exc:
        raise InvalidArgument(f"an approval's precondition must be JSON: {exc}", field="precondition") from None
    needed = need(requires) if requires is not None else None
    context = {
        "input_digest": facts.input_digest,
        "precondition": current,
        "policy_version": POLICY_VERSION,
        "authz_revision": facts.authz_revision,
        "requires": list(needed) if needed else None,
    }
    return Built(
        canonical,
        encoding.digest(canonical),
        context,
        encoding.digest(context),
        untrusted_paths(action),
        tuple(needed) if needed else None,
    )


def changed(approval: Approval | Stored, built: Built, ctx) -> str:
    """Why an approved package no longer holds ("" if it does): the action, each part of
    the context that differs, or authority that no longer allows the action."""
    reasons = []
    if built.action_hash != approval.action_hash:
        reasons.append("the action changed")
    if built.context_digest != approval.context_digest:
        reasons.append("the context changed: " + ", ".join(moved(approval, built) or ["digest"]))
    if built.requires is not None:
        decision = authorize(
            task=ctx.task_id,
            action=built.requires[0],
            resource=built.requires[1],
            boundary=EXECUTOR_BOUNDARY,
            epoch=ctx.epoch,
        )
        if not decision.allowed:
            reasons.append(f"authority no longer allows it ({decision.reason_code}, decision {decision.id})")
    return "; ".join(reasons)[:500]


def moved(approval: Approval | Stored, built: Built) -> dict:
    """Each part of the context that differs: {key: {"before", "after"}}, the shape an
    approve's APPROVAL_STALE gives (approval_decide.sql), for the approval.stale audit row."""
    before = approval.context or {}
    return {
        key: {"before": before.get(key), "after": built.context.get(key)}
        for key in sorted(set(before) | set(built.context))
        if before.get(key) != built.context.get(key)
    }


def need(value) -> tuple[str, str]:
    """requires=(action, resource): the authority the approved action needs, re-checked
    before the agent may act on the approval; never untrusted text (runtime/taint.py)."""
    refuse_untrusted(value, field="requires")
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or len(value) != 2:
        raise InvalidArgument("requires is an (action, resource) pair", field="requires")
    return patterns.action(value[0], "requires"), patterns.concrete(value[1], "requires")
