"""Capability tokens: EdDSA (Ed25519) JWTs minted per attempt and verified at the gateway,
by PyJWT over cryptography; no cryptography is written here.

A token proves who is calling: tenant, agent, owner, task and attempt epoch, for one
audience (a gateway route), for minutes. It never decides: its `scope` and
`authz_revision` say what held when it was minted, for the record and for a gateway
that wants to refuse a token older than a revocation cheaply, but whether the call may
go ahead is always authorize() on current rows (docs/adr/0013-authority-and-capability-tokens.md).
"""

from __future__ import annotations

import functools
import time
import uuid

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.exceptions import ImproperlyConfigured

from runtime import arguments, config, states
from runtime.authz import patterns
from runtime.authz.selectors import authz_revision, effective_authority
from runtime.authz.services import decide, decision_params
from runtime.errors import CapabilityRefused
from runtime.models import Decision, Task
from runtime.tasks.selectors import task_get

ALGORITHM = "EdDSA"  # fixed here, never read from a token's header (RFC 8725 §2.1)
CLAIMS = ("aud", "exp", "nbf", "iat", "jti", "tenant", "agent", "owner", "task", "epoch", "scope", "authz_revision")
DEFAULT_SECONDS = 300
MAX_SECONDS = 3600
AUDIENCE_MAX = 200
TOKEN_MAX = 16_384  # bytes; a minted token with a full scope is a few kilobytes


@functools.lru_cache(maxsize=4)
def _keys(pem: bytes) -> tuple[Ed25519PrivateKey, object]:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ImproperlyConfigured("STEWARD_CAPABILITY_KEY must be an Ed25519 private key")
    return key, key.public_key()


def _key_pair():
    pem = config.capability_key()
    if pem is None:
        raise ImproperlyConfigured("STEWARD_CAPABILITY_KEY is not set: capability tokens cannot be minted or checked")
    return _keys(pem)


def _audience(value) -> str:
    return arguments.identifier("audience", value, max_length=AUDIENCE_MAX)


def token_mint(*, task, audience: str, seconds: int = DEFAULT_SECONDS, epoch: int | None = None) -> str:
    """A token for the task's current attempt (or for its attempt `epoch`, the one the
    minting service checked: runtime/gateway/minting.py), for `audience`, valid `seconds`
    from now. Only a process holding the signing key mints: the web side, never a worker.

    Its scope is the task's effective authority at minting and its authz_revision the
    tenant's current one: both are evidence, neither is authority."""
    _audience(audience)
    arguments.bounded("seconds", seconds, minimum=1, maximum=MAX_SECONDS)
    found = task if isinstance(task, Task) else task_get(arguments.task_id(task))
    now = int(time.time())
    claims = {
        "aud": audience,
        "iat": now,
        "nbf": now,
        "exp": now + seconds,
        "jti": uuid.uuid4().hex,
        "tenant": found.tenant,
        "agent": found.agent,
        "owner": found.owner,
        "task": str(found.id),
        "epoch": found.epoch if epoch is None else epoch,
        "authz_revision": authz_revision(tenant=found.tenant),
        "scope": [{"action": a.action, "resource": a.resource} for a in effective_authority(found)],
    }
    private, _ = _key_pair()
    return jwt.encode(claims, private, algorithm=ALGORITHM)


# PyJWT's refusals, most specific first (ImmatureSignatureError and InvalidIssuedAtError,
# for nbf and iat in the future, are both "not yet valid").
_WHY = (
    (jwt.InvalidAudienceError, "wrong_audience"),
    (jwt.ExpiredSignatureError, "expired"),
    (jwt.ImmatureSignatureError, "not_yet_valid"),
    (jwt.InvalidIssuedAtError, "not_yet_valid"),
    (jwt.InvalidSignatureError, "bad_signature"),
    (jwt.InvalidAlgorithmError, "bad_signature"),
    (jwt.PyJWTError, "malformed"),
)


def token_verify(token, *, audience: str) -> dict:
    """The token's claims, or CapabilityRefused naming why: wrong_audience, expired,
    not_yet_valid, bad_signature or malformed (also a claim missing or of the wrong
    type). Proves identity only; authority is token_authorize()'s."""
    _audience(audience)
    if not isinstance(token, str) or not token or len(token) > TOKEN_MAX or not token.isascii():
        raise CapabilityRefused("not a capability token", reason="malformed")
    _, public = _key_pair()
    try:
        claims = jwt.decode(
            token,
            public,
            algorithms=[ALGORITHM],
            audience=audience,
            options={"require": list(CLAIMS), "strict_aud": True},
        )
    except jwt.PyJWTError as exc:
        reason = next(why for kind, why in _WHY if isinstance(exc, kind))
        raise CapabilityRefused(f"capability token refused: {reason.replace('_', ' ')}", reason=reason) from None
    if not _well_formed(claims):
        raise CapabilityRefused("capability token refused: a claim has the wrong form", reason="malformed")
    return claims


def _well_formed(claims: dict) -> bool:
    texts = all(isinstance(claims[k], str) and claims[k] for k in ("tenant", "agent", "owner", "task", "jti"))
    counts = all(
        isinstance(claims[k], int) and not isinstance(claims[k], bool) and 0 <= claims[k] <= top
        for k, top in (("epoch", 2**31 - 1), ("authz_revision", 2**63 - 1))
    )
    try:
        uuid.UUID(claims["task"]) if texts else None
    except ValueError:
        return False
    return texts and counts and isinstance(claims["scope"], list)


def token_authorize(*, token, audience: str, task, action: str, resource: str) -> Decision:
    """What the gateway does with each call: verify the token (CapabilityRefused if it
    proves nothing), then decide on current rows, as authorize() at credential_gateway.

    A token bound elsewhere is a recorded denial, not a silent pass: another tenant's
    (tenant_isolation, tenant_mismatch), another task's (token_task_mismatch) or a
    superseded attempt's (superseded_attempt: the task has a newer epoch), or a task that
    is no longer running (task_stopped: a stop closed its admission, runtime/stops/)."""
    claims = token_verify(token, audience=audience)
    return token_decide(claims=claims, task=task, action=action, resource=resource)


def token_decide(*, claims: dict, task=None, action: str, resource: str) -> Decision:
    """token_authorize() for claims token_verify() already returned: the gateway verifies
    once per call, and decides again on the same claims when a stream's tenant changes
    its grants mid-flight (runtime/gateway/services.py). Without `task`, the token's own
    task, and the tenant and attempt binding is checked inside the decision's statement
    (one round trip fewer on the gateway's path)."""
    patterns.action(action)
    if task is None:
        return decide(**_bound(claims, action, resource))
    found = task if isinstance(task, Task) else task_get(arguments.task_id(task))
    if claims["tenant"] != found.tenant:
        refuse = "tenant_mismatch"
    elif claims["task"] != str(found.id):
        refuse = "token_task_mismatch"
    elif claims["epoch"] != found.epoch:
        refuse = "superseded_attempt"
    elif found.status != states.RUNNING:
        refuse = "task_stopped"  # a stopping or cancelled task's token is good for nothing
    else:
        refuse = None
    # The actor is the token's agent, and the denial's audit event names what the token
    # was bound to: with a mismatch, the task's own agent did not act.
    return decide(
        task=found,
        action=action,
        resource=resource,
        boundary="credential_gateway",
        epoch=claims["epoch"],
        refuse=refuse,
        actor=f"{patterns.AGENT}{claims['agent']}",
        evidence=_evidence(claims),
    )


def token_decision_params(*, claims: dict, action: str, resource: str) -> dict:
    """The parameters of token_decide(claims=...)'s statement (runtime/sql/authz_decide.sql)
    for a statement that extends it: the gateway decides and records its call in one
    (runtime/sql/gateway_admit.sql). The same checks, the same binding to the token."""
    patterns.action(action)
    return decision_params(**_bound(claims, action, resource))


def _bound(claims: dict, action: str, resource: str) -> dict:
    """decide()'s arguments for the token's own task: its tenant and epoch are checked in
    the statement (bound_tenant), its agent acts, and a denial's event names the token."""
    return {
        "task": arguments.task_id(claims["task"]),
        "action": action,
        "resource": resource,
        "boundary": "credential_gateway",
        "epoch": claims["epoch"],
        "bound_tenant": claims["tenant"],
        "actor": f"{patterns.AGENT}{claims['agent']}",
        "evidence": _evidence(claims),
    }


def _evidence(claims: dict) -> dict:
    return {"token": {k: claims[k] for k in ("jti", "tenant", "task", "epoch", "authz_revision")}}
