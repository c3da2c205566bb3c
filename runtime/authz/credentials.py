"""Workers' own credentials, with which a worker asks the minting service for its
attempts' capability tokens (runtime/gateway/minting.py, docs/adr/0034-token-minting.md).

A credential reads `swc.<id>.<secret>`: the id is public (it is recorded on every
attempt the worker claims, runtime/sql/claim.sql), the secret is 256 random bits, shown
once when made and kept only as its SHA-256. Made and revoked by an operator (the CLI:
`manage.py steward workers credentials create|list|revoke`), each with its audit event
on the fleet's chain; each use (a mint) is audited by the minting statement itself.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

from django.db import transaction
from django.db.models.functions import Now

from runtime import arguments
from runtime.audit import AuditKind, audit_append
from runtime.errors import WorkerCredentialNotFound, WorkerCredentialRefused
from runtime.models import WorkerCredential

PREFIX = "swc"
FLEET = ""  # the audit tenant of what belongs to no tenant: the fleet's own chain
NAME_MAX = 100
_ID = re.compile(r"[0-9a-f]{16}")
_SECRET = re.compile(r"[A-Za-z0-9_-]{43}")  # token_urlsafe(32)
CREDENTIAL_MAX = len(PREFIX) + 1 + 16 + 1 + 43


@dataclass(frozen=True)
class Made:
    credential: WorkerCredential
    secret: str  # the whole `swc.<id>.<secret>`: shown once, never stored


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def credential_parse(value) -> tuple[str, str]:
    """(id, secret) of `swc.<id>.<secret>`, or WorkerCredentialRefused (malformed). Writes nothing."""
    if not isinstance(value, str) or not value:
        raise WorkerCredentialRefused(
            "send the worker's credential: Authorization: Bearer swc.<id>.<secret>", reason="missing"
        )
    if len(value) > CREDENTIAL_MAX or not value.isascii():
        raise WorkerCredentialRefused("not a worker credential", reason="malformed")
    prefix, _, rest = value.partition(".")
    ident, _, secret = rest.partition(".")
    if prefix != PREFIX or not _ID.fullmatch(ident) or not _SECRET.fullmatch(secret):
        raise WorkerCredentialRefused("not a worker credential", reason="malformed")
    return ident, secret


def worker_credential_create(*, name: str, actor: str) -> Made:
    """Make a credential for the worker `name` (a label: one per worker, say), audited.

    1. Draw the id and the secret.
    2. Store the id, the name and the secret's hash, and the audit event, together."""
    arguments.identifier("name", name, max_length=NAME_MAX)
    arguments.identifier("actor", actor, max_length=200)
    ident, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    with transaction.atomic(durable=True):
        made = WorkerCredential.objects.create(id=ident, name=name, secret_hash=secret_hash(secret), created_by=actor)
        audit_append(
            actor=actor,
            tenant=FLEET,
            kind=AuditKind.WORKER_CREDENTIAL_CREATED,
            data={"credential": ident, "name": name},
        )
    made.refresh_from_db(fields=["created_at", "uses"])
    return Made(made, f"{PREFIX}.{ident}.{secret}")


def worker_credential_revoke(*, credential: str, actor: str, reason: str = "") -> bool:
    """Revoke a credential: from the commit on, the minting service refuses it (revoked).
    Returns whether this call revoked it (False: it was revoked already). Tokens it was
    given before stay valid to their expiry (minutes), as a stopped task's do not: the
    gateway re-reads the task's state at every call."""
    arguments.identifier("actor", actor, max_length=200)
    arguments.text("reason", reason)
    if not isinstance(credential, str) or not _ID.fullmatch(credential):
        raise WorkerCredentialNotFound(
            f"no worker credential {arguments.show(credential)}", credential=str(credential)[:40]
        )
    with transaction.atomic(durable=True):
        # One conditional UPDATE: a concurrent revoke of the same credential loses here.
        won = (
            WorkerCredential.objects.filter(id=credential, revoked_at__isnull=True).update(
                revoked_at=Now(), revoked_by=actor
            )
            == 1
        )
        if not won:
            if not WorkerCredential.objects.filter(id=credential).exists():
                raise WorkerCredentialNotFound(f"no worker credential {credential}", credential=credential)
            return False
        audit_append(
            actor=actor,
            tenant=FLEET,
            kind=AuditKind.WORKER_CREDENTIAL_REVOKED,
            data={"credential": credential, "reason": reason},
        )
    return True


def worker_credentials() -> list[WorkerCredential]:
    """Every credential, newest first (a fleet has a few: one per worker)."""
    return list(WorkerCredential.objects.order_by("-created_at", "id"))
