"""The minting service's runtime half (docs/adr/0034-token-minting.md): a worker asks the
web side for a capability token for one attempt it holds, and gets one only if current
rows say it holds it. The HTTP route is console/gateway/views.py `tokens` (POST
/gateway/tokens); the worker's side is runtime/gateway/client.py token().

A worker process holds no signing key (STEWARD_PROCESS=worker: console/env.py), so agent
code running in it cannot sign a token for another task, another tenant's, or a later
attempt of its own: it can only ask here, as its worker, and the answer is bound to the
attempts that worker's credential holds.

    POST /gateway/tokens
    Authorization: Bearer swc.<id>.<secret>          (the worker's credential)
    {"task": "<uuid>", "epoch": 3, "audience": "gateway:model/v1/chat/completions"}
    -> 200 {"token": "...", "expires_in": 300, "epoch": 3, "audience": "..."}

Refusals: 401 WORKER_CREDENTIAL_REFUSED (missing, malformed, unknown, revoked), 403
TOKEN_REFUSED (no_such_task, stale_epoch, no_live_attempt, not_your_attempt,
lease_expired, task_stopped, wrong_audience), and the body's own 4xx (INPUT_TOO_LARGE,
INVALID_ENCODING, INVALID_INPUT, INVALID_ARGUMENT, ARGUMENT_OUT_OF_RANGE, TASK_NOT_FOUND
for an id that is no UUID). A well-formed request is audited whatever its answer
(capability.minted or capability.refused), in the statement that decides it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime import arguments, db
from runtime.authz.credentials import credential_parse, secret_hash
from runtime.authz.tokens import AUDIENCE_MAX, token_mint
from runtime.errors import InvalidArgument, TokenRefused, WorkerCredentialRefused
from runtime.gateway import MODEL_ROUTE
from runtime.gateway.services import gateway_body  # the model routes' reading, with a smaller limit
from runtime.tasks.selectors import task_get

TOKEN_SECONDS = 300
BODY_MAX = 4096  # bytes: a request is three short fields
FIELDS = frozenset({"task", "epoch", "audience"})
EPOCH_MAX = 2**31 - 1
_AUDIENCE = re.compile(r"gateway:tools/[a-z][a-z0-9_-]{0,62}")
_CREDENTIAL_REASONS = frozenset({"unknown", "revoked"})


@dataclass(frozen=True)
class Issued:
    token: str
    expires_in: int
    epoch: int
    audience: str

    def as_dict(self) -> dict:
        return {"token": self.token, "expires_in": self.expires_in, "epoch": self.epoch, "audience": self.audience}


@db.reads("token_issue")
@dataclass(frozen=True, slots=True)
class _Verdict:
    refused: str | None
    counted: bool


def token_issue(*, authorization: str | None, raw: bytes, content_type: str | None) -> Issued:
    """A token for the attempt the body names, for the worker the credential names.

    1. Read the credential (401 if absent or malformed) and the body (4xx), writing nothing.
    2. Decide on current rows, count the credential's use and audit the answer, in one
       statement (runtime/sql/token_issue.sql).
    3. Sign the token, bound to the epoch checked in 2."""
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise WorkerCredentialRefused(
            "send the worker's credential: Authorization: Bearer swc.<id>.<secret>", reason="missing"
        )
    ident, secret = credential_parse(given.strip())
    task, epoch, audience = _request(raw, content_type)
    verdict = db.fetchrow(
        "token_issue",
        {
            "credential": ident,
            "secret_hash": secret_hash(secret),
            "task": task,
            "epoch": epoch,
            "audience": audience,
            "audience_ok": audience == MODEL_ROUTE or bool(_AUDIENCE.fullmatch(audience)),
        },
        row=_Verdict,
    )
    if verdict.refused in _CREDENTIAL_REASONS:
        raise WorkerCredentialRefused(f"worker credential refused: {verdict.refused}", reason=verdict.refused)
    if verdict.refused is not None:
        raise TokenRefused(
            f"no token for attempt {epoch} of task {task}: {verdict.refused.replace('_', ' ')}",
            reason=verdict.refused,
            task=str(task),
            epoch=epoch,
        )
    token = token_mint(task=task_get(task), audience=audience, seconds=TOKEN_SECONDS, epoch=epoch)
    return Issued(token, TOKEN_SECONDS, epoch, audience)


def _request(raw: bytes, content_type: str | None):
    body = gateway_body(raw, content_type=content_type, limit=BODY_MAX)
    if set(body) != FIELDS:
        raise InvalidArgument(
            "the body holds task, epoch and audience, and nothing else",
            field="body",
            missing=sorted(FIELDS - set(body)),
            unknown=sorted(str(k)[:40] for k in set(body) - FIELDS)[:5],
        )
    task = arguments.task_id(body["task"])
    epoch = arguments.bounded("epoch", body["epoch"], minimum=1, maximum=EPOCH_MAX)
    audience = arguments.identifier("audience", body["audience"], max_length=AUDIENCE_MAX)
    return task, epoch, audience
