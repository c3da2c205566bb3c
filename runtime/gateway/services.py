"""What the credential gateway does with each call, on current rows.

A call is admitted in three steps, each refusing before anything is written when it
can: gateway_verify (the token proves who calls: 401 otherwise, nothing written),
gateway_body (the request is plain JSON within limits: 4xx otherwise, nothing
written), gateway_admit (decide at credential_gateway and record the call: one
decision row, one call row). The streams a process relays are re-checked together,
gateway_recheck (one statement for all of them) then gateway_redecide for each whose
authority may have changed, and every admitted call ends in gateway_finish. Attribution is the token's alone: nothing
here reads a tenant, an actor or a task from the request.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import psycopg
from django.db import IntegrityError

from runtime import arguments, config, db, encoding, states
from runtime.authz.tokens import token_decide, token_decision_params, token_verify
from runtime.errors import (
    CallInFlight,
    CapabilityRefused,
    InputTooLarge,
    InvalidArgument,
    InvalidInput,
    StewardError,
    TaskNotFound,
)
from runtime.gateway import (  # noqa: F401 - the routes' names, for the web side
    MODEL_ACTION,
    MODEL_ROUTE,
    TOOL_ACTION,
    model_resource,
    tool_call_piece,
    tool_resource,
    tool_route,
)
from runtime.gateway.paths import ToolTarget, tool_target  # noqa: F401 - a tool call's one path, for the web side
from runtime.limits.budgets import TOKENS_MAX  # one call's count is bounded as a budget is
from runtime.limits.quotas import Taken, quota_give, quota_take
from runtime.models import Decision
from runtime.stops.services import stop_ack

# A request body larger than this is refused before it is parsed (INPUT_TOO_LARGE).
MAX_BODY_BYTES = 1024 * 1024
# How often a process's streams look at their tenants' authz_revision and their tasks'
# status (gateway_recheck, one statement for all of them): a revocation or a stop is
# seen within this long, and the stream cut right after (the contract allows 1 s).
RECHECK_SECONDS = 0.1
STEP_MAX = 2**31 - 1


@dataclass(slots=True)
class Admission:
    """An admitted (or denied, or replayed) call, as the web side carries it to the end."""

    call_id: object
    outcome: str  # admitted, denied or replayed (runtime/models/gateway_call.py)
    decision: Decision
    claims: dict
    tenant: str
    task_id: object
    action: str
    resource: str
    revision: int
    response: dict | None = None  # a replayed call's recorded output
    receipt: dict | None = None
    budget: dict | None = None  # a budget_exhausted denial's budget: {scope, limit, used}
    quota: Taken | None = None  # a quota_exceeded or quota_unavailable denial's quota, and when to retry
    decided_at: datetime | None = None  # the database time the call was last decided (gateway_recheck)
    key: str | None = None  # the caller's Idempotency-Key; None for an unkeyed call

    @property
    def keyed(self) -> bool:
        return self.key is not None

    @property
    def admitted(self) -> bool:
        return self.outcome == "admitted"


def gateway_verify(*, authorization: str | None, route: str) -> dict:
    """The claims of the `Authorization: Bearer <capability token>` header, for `route`;
    CapabilityRefused (401) naming why otherwise. Writes nothing."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise CapabilityRefused("send a capability token: Authorization: Bearer <token>", reason="malformed")
    return token_verify(token.strip(), audience=route)


def gateway_body(raw: bytes, *, content_type: str | None, limit: int = MAX_BODY_BYTES) -> dict:
    """A JSON object body (strict UTF-8, at most `limit` bytes, nested at most
    encoding.MAX_DEPTH deep), or the StewardError saying why not. Writes nothing. The
    model and tool routes' bodies and the minting service's (runtime/gateway/minting.py)."""
    kind = (content_type or "application/json").split(";")[0].strip().lower()
    if kind != "application/json":
        raise InvalidArgument(f"send the body as application/json, not {kind[:60]}", field="content-type")
    if len(raw) > limit:
        raise InputTooLarge(f"the body is over {limit} bytes", limit=limit)
    value = encoding.parse(raw, what="the body", limit=limit)
    if not isinstance(value, dict):
        raise InvalidInput("the body must be a JSON object")
    encoding.plain(value, what="the body", limit=limit)  # \u0000, lone surrogates, huge numbers
    return value


def gateway_admit(
    *,
    claims: dict,
    route: str,
    action: str,
    resource: str,
    idempotency_key,
    step_seq=None,
    in_flight_seconds: float = 120.0,
    service: str | None = None,
) -> Admission:
    """Decide whether the token's task may take `action` on `resource` now, and record the call.

    1. Check the key and the step's form. The key is the worker's effect key; a call
       without one (the official `openai` client sends none) is admitted all the same as
       an unkeyed call: decided, recorded, counted and audited like any, but never
       replayed or refused busy, since there is nothing to deduplicate it by. A key that
       is sent must still be 1-255 printable characters.
    2. Decide on current rows (runtime.authz, as token_decide at credential_gateway): a
       token bound to another tenant or a superseded attempt is a recorded denial.
    3. Record the call: denied, admitted, replayed when this key already committed for
       the task (its output returned), or busy (CALL_IN_FLIGHT, 409) while an earlier
       send of the key has not ended.

    A model call (`action` model.call) is denied budget_exhausted once its task's, its
    tree's or its tenant's counted tokens have reached a budget. A call to an outside
    `service` with a quota first takes one from the quota's window in Redis
    (runtime/limits/quotas.py); past it the decision is quota_exceeded (or
    quota_unavailable, Redis down), recorded like any denial, and a counted call that
    is not admitted is given back.

    Steps 2 and 3 are one statement, runtime/sql/gateway_admit.sql (authz_decide's, then
    the call's row), committed on its own: one round trip instead of four (BEGIN, two
    statements, COMMIT), which under load was most of what the gateway added.
    """
    key = None if idempotency_key is None else arguments.identifier("Idempotency-Key", idempotency_key, max_length=255)
    if step_seq is not None:
        arguments.bounded("Steward-Step", step_seq, minimum=0, maximum=STEP_MAX)
    params = token_decision_params(claims=claims, action=action, resource=resource)
    taken = quota_take(tenant=claims["tenant"], service=service) if service is not None else None
    params.update(budgeted=action == MODEL_ACTION, quota=taken and taken.reason)
    params.update(
        step=step_seq,
        jti=claims["jti"],
        route=route,
        key=key,
        durable=config.gateway_durable_admit(),
        in_flight=in_flight_seconds,
    )
    # Autocommit (no transaction.atomic): the statement is its own transaction, so the
    # decision and the call's row commit together with no BEGIN or COMMIT round trip.
    # Inside a caller's transaction it commits with that transaction instead.
    outcome = None
    try:
        admitted = db.fetchone("gateway_admit", params, row=_Admitted)
        if admitted is None:
            raise TaskNotFound(f"no task {params['task']}", task=str(params["task"]))
        outcome = admitted.outcome
    finally:
        if taken is not None and outcome != "admitted":
            quota_give(taken)  # counted, but nothing is forwarded: the window keeps its place
    decision, response, receipt, budget = admitted.decision, admitted.response, admitted.receipt, admitted.budget
    if outcome == "busy":
        raise CallInFlight(
            f"an earlier send of {key!r} is still in flight; send it again once it has answered", idempotency_key=key
        )
    return Admission(
        call_id=admitted.call_id,
        outcome=outcome,
        decision=decision,
        claims=claims,
        tenant=decision.tenant,
        task_id=decision.task_id,
        action=action,
        resource=resource,
        revision=decision.authz_revision,
        response=encoding.decode(response) if isinstance(response, str) else response,
        receipt=encoding.decode(receipt) if isinstance(receipt, str) else receipt,
        budget=encoding.decode(budget) if isinstance(budget, str) else budget,
        quota=taken,
        key=key,
    )


@db.reads("gateway_admit")
@dataclass(frozen=True, slots=True)
class _Admitted:
    decision: Decision  # authz_decide's decision at credential_gateway: its columns come first
    call_id: uuid.UUID  # the call's row
    outcome: str  # denied, admitted, replayed or busy
    response: str | dict | None  # a replayed call's recorded output (jsonb, as text on this connection)
    receipt: str | dict | None  # and its receipt
    budget: str | dict | None  # a budget_exhausted denial's budget: scope, limit, used
    synchronous_commit: str  # set_config's answer: whether this statement's commit waits for its WAL flush


@db.reads("gateway_recheck")
@dataclass(frozen=True, slots=True)
class _Rechecked:
    call: uuid.UUID  # the call in flight
    revision: int  # its tenant's authz_revision now
    status: str | None  # its task's status now
    expired: bool  # a grant of its tenant for its action expired since it was last decided


def gateway_recheck(admissions: Sequence[Admission]) -> list[Admission]:
    """Which of these calls in flight must be decided again: those whose tenant's
    authz_revision moved since their last decision (a grant changed), whose task is no
    longer running (a stop), or for whose action a grant of the tenant expired since that
    decision (an expiry moves no revision: issue 20 found a stream outliving its grant's
    expiry), read for all of them in one round trip (runtime/sql/gateway_recheck.sql).
    Writes nothing: otherwise the last decision stands."""
    if not admissions:
        return []
    rows = db.fetchall(
        "gateway_recheck",
        {
            "calls": [a.call_id for a in admissions],
            "tenants": [a.tenant for a in admissions],
            "tasks": [a.task_id for a in admissions],
            "actions": [a.action for a in admissions],
            "since": [a.decided_at or a.decision.at for a in admissions],
        },
        row=_Rechecked,
    )
    by_call = {a.call_id: a for a in admissions}
    return [
        by_call[row.call]
        for row in rows
        if row.status != states.RUNNING or row.revision != by_call[row.call].revision or row.expired
    ]


def gateway_redecide(admission: Admission) -> Decision | None:
    """Decide a call in flight again on current rows (one decision, recorded like any):
    None while it may go on, or the denying Decision (a stopped task's token is denied
    task_stopped). The admission remembers the revision decided on, so the next
    gateway_recheck asks again only if it moves once more, or another grant expires."""
    decision = token_decide(claims=admission.claims, action=admission.action, resource=admission.resource)
    admission.revision, admission.decided_at = decision.authz_revision, decision.at
    return None if decision.allowed else decision


def usage_tokens(usage, *, fallback: int = 0) -> int:
    """The tokens a provider's `usage` object says a call used: prompt_tokens +
    completion_tokens (total_tokens when those are missing), or `fallback` when it says
    nothing usable. A provider's numbers are untrusted: anything that is not a
    non-negative integer, or more than TOKENS_MAX, counts as the fallback or the cap."""
    if not isinstance(usage, dict):
        return fallback

    def count(name):
        value = usage.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    prompt, completion, total = count("prompt_tokens"), count("completion_tokens"), count("total_tokens")
    if prompt is not None or completion is not None:
        return min((prompt or 0) + (completion or 0), TOKENS_MAX)
    return fallback if total is None else min(total, TOKENS_MAX)


def untrusted(source: str, **output) -> dict:
    """Output from a model or a tool, marked as data no one may act on as an instruction."""
    return {"untrusted": True, "source": source, **output}


def gateway_finish(
    admission: Admission,
    *,
    outcome: str,
    status: int | None = None,
    receipt: dict | None = None,
    response: dict | None = None,
    tokens: int = 0,
) -> bool:
    """End an admitted call once: committed, partial or failed, with the provider's
    receipt (response id and status; never a key) and its output as untrusted data.
    Returns whether this call was still admitted (a second finish changes nothing).
    A model call's `tokens` (prompt + completion, usage_tokens()) are counted against
    its task's, tree's and tenant's budgets in the same statement.

    An unkeyed call that ends `partial` (a stream cut short) is recorded `unknown`
    instead: a keyed one may be sent again under its key, decided anew, but what the
    provider did with an unkeyed one is not known and no one can ask again by key.

    If the call's task is stopping (or its stop already ended it), and this was the
    last of its calls in flight, the gateway acknowledges the stop (gateway_stop_ack)."""
    if outcome not in ("committed", "partial", "failed"):
        raise InvalidArgument("a call ends committed, partial or failed", field="outcome")
    if response is not None and response.get("untrusted") is not True:
        raise InvalidArgument("a provider's output is recorded as untrusted", field="response")
    tokens = arguments.bounded("tokens", tokens, minimum=0, maximum=TOKENS_MAX)
    if outcome == "partial" and not admission.keyed:
        outcome = "unknown"
    params = {
        "id": admission.call_id,
        "outcome": outcome,
        "status": status,
        "tokens": tokens,
        "receipt": _storable(receipt),
        "response": _storable(response),
    }
    try:
        return _finish(params, admission.task_id)
    except (IntegrityError, psycopg.errors.UniqueViolation):
        # Another send of this key committed between our read and write. runtime.db's
        # cursor raises psycopg's own error, not Django's wrapper of it.
        return _finish({**params, "outcome": "partial"}, admission.task_id)


@db.reads("gateway_call_finish")
@dataclass(frozen=True, slots=True)
class _Finished:
    ended: bool  # this call ended it (it was still admitted)
    status: str  # its task's status
    stop_id: uuid.UUID | None  # its task's stop, if any
    synchronous_commit: str  # set_config's answer (off: this commit does not wait for its WAL flush)


def _finish(params: dict, task_id) -> bool:
    # One statement in autocommit (gateway_call_finish.sql): it reads the call's task FOR
    # KEY SHARE, ends the call and turns off its own commit's WAL-flush wait.
    finished = db.fetchrow("gateway_call_finish", params, row=_Finished)
    if not finished.ended:
        return False
    if finished.status != states.RUNNING and finished.stop_id is not None:
        # The call's task was stopped: was this the last of its calls in flight?
        gateway_stop_ack(task_id=task_id, stop_id=finished.stop_id)
    return True


@db.reads("gateway_stop_report")
@dataclass(frozen=True, slots=True)
class _StopReport:
    open_calls: int  # the task's calls still in flight
    cut: list[str]  # calls the stop cut
    finished: list[str]  # calls that ended by themselves since the stop
    unresolved: list[str]  # admitted calls past the in-flight bound that never reported back
    refused: int  # the task's tokens refused since the stop (task_stopped decisions)


def gateway_stop_ack(*, task_id, stop_id) -> bool:
    """The credential gateway's acknowledgment of a task's stop, once none of its calls is
    in flight any more: the calls it cut, those that ended by themselves, those that
    never reported back (unresolved) and how many of the task's tokens it refused since
    the stop (task_stopped decisions). Each call that ends runs this after its own
    commit, so the last one to end sees all the others ended; two that end together may
    both write it, and the acknowledgment is kept once (stop_ack). Returns whether this
    call wrote it."""
    report = db.fetchrow(
        "gateway_stop_report",
        {"stop": stop_id, "task": task_id, "in_flight": config.gateway_timeout_seconds()},
        row=_StopReport,
    )
    if report.open_calls:
        return False  # another call of the task is still in flight: its end answers
    return stop_ack(
        task_id=task_id,
        boundary=states.CREDENTIAL_GATEWAY,
        by="credential_gateway",
        stop_id=stop_id,
        detail={
            "cut": report.cut,
            "finished": report.finished,
            "unresolved": report.unresolved,
            "tokens_refused": report.refused,
        },
    )


def _storable(value: dict | None) -> str | None:
    if value is None:
        return None
    try:
        return encoding.plain(value, what="the provider's output", limit=4 * MAX_BODY_BYTES)
    except StewardError as exc:  # \u0000 or a lone surrogate from a provider: keep why, not the text
        return json.dumps({**({"untrusted": True} if value.get("untrusted") else {}), "unstorable": exc.code})
