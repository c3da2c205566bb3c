"""Signed webhooks: POST /hooks/<id> (console/hooks/views.py is the HTTP adapter).

A sender signs `timestamp + "." + body` with HMAC-SHA256 under the webhook's secret and
sends three headers: the timestamp (Unix seconds), the signature (`sha256=<hex>`) and a
delivery id. Refused, in this order, each with a stable code:
- a header missing: 401 SIGNATURE_MISSING;
- a webhook that does not exist, or a signature that does not match: 401
  SIGNATURE_INVALID (the same answer, so webhook ids cannot be probed);
- a timestamp more than TOLERANCE from the database's clock: 401 TIMESTAMP_OUT_OF_RANGE
  (checked after the signature, so the refusal is about a signed timestamp);
- a paused webhook: 409 WEBHOOK_PAUSED;
- a body that is not a JSON object within the input limits: 400 with the input's codes;
- a delivery id already accepted: 409 DELIVERY_REPLAYED, naming the task it made. The
  unique (webhook, delivery_id) decides between two concurrent deliveries of one id;
  the timestamp bounds how long a captured request could be replayed with a new id
  (never: the id is inside no signature, but the timestamp is, and it goes stale).
The payload becomes the task's input, submitted with a caller key derived from the
delivery id, in the transaction that records the delivery.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import uuid
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken
from django.db import IntegrityError, transaction
from django.db.models.functions import Now

from runtime import arguments, config, db, encoding
from runtime.audit import AuditKind, audit_append
from runtime.errors import (
    DeliveryReplayed,
    SignatureInvalid,
    SignatureMissing,
    TimestampOutOfRange,
    WebhookNotFound,
    WebhookPaused,
)
from runtime.models import Webhook, WebhookDelivery
from runtime.tasks.services import input_parse, task_submit
from runtime.triggers import target

log = logging.getLogger(__name__)

TOLERANCE_SECONDS = 300
DELIVERY_ID_MAX = 200
SIGNATURE_PREFIX = "sha256="


def webhook_body_limit() -> int:
    """The most bytes a delivery's body may hold: the input limit with encode.parse()'s
    slack for JSON text (escapes, whitespace); parse() and task_submit check the rest."""
    return config.max_input_bytes() * encoding.TEXT_SLACK


def _fernet() -> Fernet:
    return Fernet(config.webhook_key())


def webhook_create(
    *, tenant: str, name: str, agent: str, owner: str, actor: str, pool: str | None = None
) -> tuple[Webhook, str]:
    """Make a webhook and return it with its secret, which is never shown again.

    1. Check the target (agent, owner, pool) as task_submit would.
    2. Mint a 32-byte secret and store it encrypted.
    3. Insert and audit `webhook.created` (without the secret) in one transaction.
    """
    target.check(tenant=tenant, agent=agent, input=None, owner=owner, pool=pool, actor=actor)
    name = target.name(name)
    secret = "whsec_" + secrets.token_urlsafe(32)
    with transaction.atomic(durable=True):
        hook = target.create_named(
            Webhook,
            "webhook",
            tenant=tenant,
            name=name,
            agent=agent,
            owner=owner,
            pool=pool,
            secret_encrypted=_fernet().encrypt(secret.encode()),
            created_by=actor,
        )
        audit_append(
            actor=actor,
            tenant=tenant,
            kind=AuditKind.WEBHOOK_CREATED,
            data={"webhook": str(hook.id), "name": name, "agent": agent},
        )
    return hook, secret


def webhook_get(webhook_id, *, tenant: str | None = None) -> Webhook:
    return target.get(Webhook, WebhookNotFound, "webhook", webhook_id, tenant)


def _set_paused(webhook_id, *, actor: str, tenant: str | None, paused: bool) -> bool:
    arguments.actor(actor)
    with transaction.atomic(durable=True):
        hook = webhook_get(webhook_id, tenant=tenant)
        won = Webhook.objects.filter(id=hook.id, paused=not paused).update(paused=paused) == 1
        if won:
            audit_append(
                actor=actor,
                tenant=hook.tenant,
                kind=AuditKind.WEBHOOK_PAUSED if paused else AuditKind.WEBHOOK_RESUMED,
                data={"webhook": str(hook.id), "name": hook.name},
            )
    return won


def webhook_pause(*, webhook_id, actor: str, tenant: str | None = None) -> bool:
    return _set_paused(webhook_id, actor=actor, tenant=tenant, paused=True)


def webhook_resume(*, webhook_id, actor: str, tenant: str | None = None) -> bool:
    return _set_paused(webhook_id, actor=actor, tenant=tenant, paused=False)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """What a sender puts in the signature header (used by the tests and the docs)."""
    return SIGNATURE_PREFIX + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Accepted:
    delivery_id: str
    task_id: uuid.UUID


def webhook_deliver(
    *, webhook_id: str, timestamp: str | None, signature: str | None, delivery_id: str | None, body: bytes
) -> Accepted:
    """Verify and accept one delivery (the refusals and their order: the module's
    docstring). The body is bounded by the caller (the HTTP adapter reads at most the
    input limit) and is verified before it is parsed."""
    if not timestamp or not signature or not delivery_id:
        raise SignatureMissing(
            "a delivery needs the X-Steward-Timestamp, X-Steward-Signature and X-Steward-Delivery headers"
        )
    try:
        hook = webhook_get(webhook_id)
    except WebhookNotFound:
        raise SignatureInvalid("the signature does not match") from None
    try:
        secret = _fernet().decrypt(bytes(hook.secret_encrypted)).decode()
    except InvalidToken:
        # SECRET_KEY changed since the webhook was made: no delivery can be verified.
        log.error("webhook %s: its secret cannot be decrypted (was STEWARD_SECRET_KEY changed?)", hook.id)
        raise SignatureInvalid("the signature does not match") from None
    if not hmac.compare_digest(sign(secret, timestamp, body).encode(), signature.strip().encode("utf-8", "replace")):
        raise SignatureInvalid("the signature does not match")
    now = db.fetchrow("clock", {"seconds": 0}, row=db.Clock).now
    if (
        not timestamp.isascii()
        or not timestamp.isdigit()
        or len(timestamp) > 12
        or abs(now - int(timestamp)) > TOLERANCE_SECONDS
    ):
        raise TimestampOutOfRange(
            f"the timestamp must be Unix seconds within {TOLERANCE_SECONDS} s of now",
            tolerance_seconds=TOLERANCE_SECONDS,
        )
    delivery_id = arguments.identifier("delivery_id", delivery_id, max_length=DELIVERY_ID_MAX)
    if hook.paused:
        raise WebhookPaused(f"webhook {hook.name} is paused", webhook=str(hook.id))
    payload = input_parse(body)
    digest = hashlib.sha256(body).hexdigest()
    key = f"webhook:{hook.id}:{hashlib.sha256(delivery_id.encode()).hexdigest()[:40]}"
    try:
        with transaction.atomic(durable=True):
            record = WebhookDelivery.objects.create(webhook=hook, delivery_id=delivery_id, body_digest=digest)
            submission = task_submit(
                agent=hook.agent,
                input=payload,
                tenant=hook.tenant,
                owner=hook.owner,
                actor=f"webhook:{hook.id}",
                pool=hook.pool,
                idempotency_key=key,
            )
            WebhookDelivery.objects.filter(id=record.id).update(task=submission.task_id, received_at=Now())
            audit_append(
                actor=f"webhook:{hook.id}",
                tenant=hook.tenant,
                task_id=submission.task_id,
                kind=AuditKind.WEBHOOK_DELIVERED,
                data={"webhook": str(hook.id), "delivery_id": delivery_id, "body_sha256": digest},
            )
    except IntegrityError:
        # The unique (webhook, delivery_id): this id was accepted before (or concurrently).
        earlier = WebhookDelivery.objects.filter(webhook=hook, delivery_id=delivery_id).values("task_id").first()
        raise DeliveryReplayed(
            f"delivery {delivery_id[:60]!r} was already accepted", task_id=str(earlier["task_id"]) if earlier else None
        ) from None
    return Accepted(delivery_id, submission.task_id)
