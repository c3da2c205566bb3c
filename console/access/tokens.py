"""API tokens: the principal a `Bearer` token stands for, read on every request; making
and revoking them, audited; which a person sees."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from console.access.principals import _RANK, ADMINISTER, Principal, acting, require
from console.models import OPERATE, OPERATOR, SCOPES, ApiToken, Membership
from runtime import arguments
from runtime.errors import Forbidden, InvalidArgument, InvalidTransition, TokenNotFound, Unauthenticated
from runtime.paging import Keyset, Page, keyset_page
from runtime.trail.services import AuditKind, audit_record

TOKEN_PREFIX = "stw_"
TOKEN_BYTES = 32
# A token's last use is written at most this often: a write per request would add a
# commit to every API call, and "last used" is for a person reading a list.
LAST_USED_EVERY = timedelta(minutes=1)


def token_principal(authorization: str | None) -> Principal:
    """The principal a `Bearer` token stands for. Unknown, revoked and expired tokens are
    all AUTH_REQUIRED, at once: the row is read on every request, never cached."""
    if not authorization or not authorization.startswith("Bearer "):
        raise Unauthenticated("send an API token: Authorization: Bearer stw_...")
    secret = authorization[len("Bearer ") :].strip()
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 100:
        raise Unauthenticated("that is not a Steward API token")
    token = ApiToken.objects.select_related("user").filter(digest=_digest(secret)).first()
    now = timezone.now()
    if token is None or token.revoked_at is not None or (token.expires_at and token.expires_at <= now):
        raise Unauthenticated("this API token is unknown, revoked or expired")
    membership = Membership.objects.filter(user_id=token.user_id, tenant_id=token.tenant_id).first()
    if membership is None or not token.user.is_active:
        raise Unauthenticated("this API token's owner no longer belongs to its tenant")
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_EVERY:
        # Conditional: of two requests racing here, one writes.
        ApiToken.objects.filter(id=token.id).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_EVERY)
        ).update(last_used_at=Now())
    return Principal(
        user=token.user,
        tenant=token.tenant_id,
        role=membership.role,
        channel="api",
        scope=token.scope,
        credential=f"token:{token.prefix}",
    )


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    secret: str  # shown once; only its digest is stored


def token_create(
    *, principal: Principal, name: str, scope: str, expires_at: datetime | None = None, for_user=None
) -> NewToken:
    """A new token for the principal (or, for an admin, another member) in the
    principal's tenant. An operate token for someone who may not operate is refused."""
    arguments.text("name", name, max_length=100)
    if not name.strip():
        raise InvalidArgument("a token needs a name", field="name")
    if scope not in SCOPES:
        raise InvalidArgument(f"scope must be one of {', '.join(SCOPES)}", field="scope")
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidArgument("expires_at must be in the future", field="expires_at")
    owner = principal.user if for_user is None else for_user
    if owner.pk != principal.user.pk:
        require(principal, ADMINISTER)
    membership = Membership.objects.filter(user=owner, tenant_id=principal.tenant).first()
    if membership is None:
        raise TokenNotFound("no such member in this tenant")
    if scope == OPERATE and _RANK[membership.role] < _RANK[OPERATOR]:
        raise Forbidden(
            f"a {membership.role} gets read tokens only: an operate token needs the operator role in {principal.tenant}",
            role=membership.role,
            scope=scope,
        )
    secret = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
    with transaction.atomic(durable=True), acting(principal):
        token = ApiToken.objects.create(
            prefix=secret[: len(TOKEN_PREFIX) + 8],
            digest=_digest(secret),
            user=owner,
            tenant_id=principal.tenant,
            name=name.strip(),
            scope=scope,
            expires_at=expires_at,
            created_by=principal.actor,
        )
        audit_record(
            actor=principal.actor,
            tenant=principal.tenant,
            kind=AuditKind.TOKEN_CREATED,
            data={
                "token": token.prefix,
                "name": token.name,
                "scope": scope,
                "for": owner.get_username(),
                "expires_at": expires_at.isoformat() if expires_at else None,
            },
        )
    return NewToken(token, secret)


def token_revoke(*, principal: Principal, token_id: int) -> ApiToken:
    """Revoke a token of the principal's own (or, for an admin, anyone's in the tenant).
    Refused from then on. Revoking a revoked token is an error, not a second event."""
    token = (
        tokens_visible_to(principal)
        .filter(id=arguments.bounded("token", token_id, minimum=1, maximum=2**63 - 1))
        .first()
    )
    if token is None:
        raise TokenNotFound(f"no token {token_id}", token=token_id)
    with transaction.atomic(durable=True), acting(principal):
        won = ApiToken.objects.filter(id=token.id, revoked_at__isnull=True).update(
            revoked_at=Now(), revoked_by=principal.actor
        )
        if not won:  # revoked already, by this person or another
            raise InvalidTransition(f"token {token.prefix}… is already revoked", token=token.prefix)
        audit_record(
            actor=principal.actor,
            tenant=principal.tenant,
            kind=AuditKind.TOKEN_REVOKED,
            data={"token": token.prefix, "name": token.name, "owner": token.user.get_username()},
        )
    token.refresh_from_db()
    return token


def tokens_visible_to(principal: Principal):
    """A person sees their own tokens in the tenant; an admin sees everyone's there."""
    tokens = ApiToken.objects.filter(tenant_id=principal.tenant).select_related("user").order_by("-id")
    return tokens if principal.may(ADMINISTER) else tokens.filter(user=principal.user)


TOKENS_BY_ID = Keyset("tokens", ("id",), list, lambda raw: (int(raw[0]),))


def token_page(principal: Principal, *, after: str | None = None, limit: int = 50) -> Page[ApiToken]:
    """The tokens tokens_visible_to shows, newest first, a keyset page at a time
    (runtime/paging.py): a tenant's tokens grow with every script that ever made one, and
    revoked ones are kept for the audit trail. The cursor is bound to whose tokens it
    pages: an admin's cursor means nothing to them once demoted (INVALID_INPUT)."""
    admin = principal.may(ADMINISTER)
    filters = {"tenant": principal.tenant, "owner": None if admin else principal.user.pk}
    return keyset_page(tokens_visible_to(principal), keyset=TOKENS_BY_ID, filters=filters, after=after, limit=limit)


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()
