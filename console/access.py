"""Who may see and do what: the one access module of the web side.

Every view, htmx fragment and API route asks this module, in three steps:

1. *Who is this?* A console session (the person and the tenant they switched to) or an
   API token (`Authorization: Bearer stw_...`: its person, its tenant and its scope) is
   turned into a `Principal`, or refused with AUTH_REQUIRED (401).
2. *May they?* `require(principal, OPERATE)`: a viewer, or a read token, gets FORBIDDEN
   (403) on an action; only an admin administers (members, other people's tokens).
3. *Is it theirs?* Objects are looked up inside the principal's tenant only, so another
   tenant's task, effect or audit event is not found (404), never forbidden: a 403
   would tell a stranger that the id exists.

While a request acts, `acting(principal)` files every audit event it writes under the
person (actor), the channel (`console` or `api`) and the token or session that carried it.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from console.models import ADMIN, OPERATE, OPERATOR, READ, ROLES, SCOPES, VIEWER, ApiToken, Membership, Tenant
from runtime import arguments
from runtime.errors import (
    Forbidden,
    InvalidArgument,
    InvalidTransition,
    PersonNotFound,
    TenantNotFound,
    TokenNotFound,
    Unauthenticated,
)
from runtime.trail.services import acting_through, audit_record

# What a principal asks to do. Reading is every member's; operating (submit, cancel,
# resume, resolve, pool limits) needs an operator and an `operate` credential;
# administering (members, other people's tokens) needs an admin.
READ_ACTION, OPERATE_ACTION, ADMINISTER = "read", "operate", "administer"
_RANK = {VIEWER: 0, OPERATOR: 1, ADMIN: 2}
_NEEDS = {READ_ACTION: VIEWER, OPERATE_ACTION: OPERATOR, ADMINISTER: ADMIN}

TOKEN_PREFIX = "stw_"
TOKEN_BYTES = 32
# A token's last use is written at most this often: a write per request would add a
# commit to every API call, and "last used" is for a person reading a list.
LAST_USED_EVERY = timedelta(minutes=1)
SESSION_TENANT = "steward_tenant"


@dataclass(frozen=True)
class Principal:
    user: AbstractBaseUser
    tenant: str
    role: str
    channel: str      # "console" or "api"
    scope: str        # OPERATE for a session; a token's own scope
    credential: str   # "session:<id>" or "token:<prefix>", as audit rows name it

    @property
    def actor(self) -> str:
        return f"user:{self.user.get_username()}"

    def may(self, action: str) -> bool:
        if action != READ_ACTION and self.scope == READ:
            return False
        return _RANK[self.role] >= _RANK[_NEEDS[action]]


def require(principal: Principal, action: str) -> Principal:
    if not principal.may(action):
        why = "this token is read-only" if principal.scope == READ and action != READ_ACTION else \
            f"a {principal.role} of {principal.tenant} may not {action}"
        raise Forbidden(f"{why}", action=action, role=principal.role, scope=principal.scope)
    return principal


@contextlib.contextmanager
def acting(principal: Principal):
    """Every audit event written inside says which channel and credential carried it."""
    with acting_through(channel=principal.channel, credential=principal.credential):
        yield principal


# --- sessions (the console) -----------------------------------------------------------------


def tenants_of(user) -> list[Membership]:
    """The person's memberships, by tenant name: what the tenant switcher offers."""
    if not user.is_authenticated:
        return []
    return list(Membership.objects.filter(user=user).select_related("tenant").order_by("tenant__name", "tenant_id"))


def session_principal(request) -> Principal:
    """The signed-in person in the tenant they switched to (their first, until they do).
    A person with no membership is signed in but may see nothing: AUTH_REQUIRED."""
    user = request.user
    if not user.is_authenticated:
        raise Unauthenticated("sign in first")
    memberships = {m.tenant_id: m for m in tenants_of(user)}
    if not memberships:
        raise Unauthenticated(f"{user.get_username()} belongs to no tenant")
    chosen = request.session.get(SESSION_TENANT)
    membership = memberships.get(chosen) or next(iter(memberships.values()))
    key = request.session.session_key or ""
    return Principal(user=user, tenant=membership.tenant_id, role=membership.role, channel="console",
                     scope=OPERATE, credential=f"session:{hashlib.sha256(key.encode()).hexdigest()[:12]}")


def switch_tenant(request, tenant: str) -> Principal:
    """Make `tenant` the session's tenant; one the person is not a member of is not found."""
    if not Membership.objects.filter(user=request.user, tenant_id=tenant).exists():
        raise TenantNotFound(f"no tenant {tenant!r}", tenant=tenant)
    request.session[SESSION_TENANT] = tenant
    return session_principal(request)


# --- API tokens -----------------------------------------------------------------------------


def token_principal(authorization: str | None) -> Principal:
    """The principal a `Bearer` token stands for. Unknown, revoked and expired tokens are
    all AUTH_REQUIRED, at once: the row is read on every request, never cached."""
    if not authorization or not authorization.startswith("Bearer "):
        raise Unauthenticated("send an API token: Authorization: Bearer stw_...")
    secret = authorization[len("Bearer "):].strip()
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 100:
        raise Unauthenticated("that is not a Steward API token")
    token = (ApiToken.objects.select_related("user").filter(digest=_digest(secret)).first())
    now = timezone.now()
    if token is None or token.revoked_at is not None or (token.expires_at and token.expires_at <= now):
        raise Unauthenticated("this API token is unknown, revoked or expired")
    membership = Membership.objects.filter(user_id=token.user_id, tenant_id=token.tenant_id).first()
    if membership is None or not token.user.is_active:
        raise Unauthenticated("this API token's owner no longer belongs to its tenant")
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_EVERY:
        # Conditional: of two requests racing here, one writes.
        ApiToken.objects.filter(id=token.id).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_EVERY)).update(last_used_at=Now())
    return Principal(user=token.user, tenant=token.tenant_id, role=membership.role, channel="api",
                     scope=token.scope, credential=f"token:{token.prefix}")


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    secret: str  # shown once; only its digest is stored


def token_create(*, principal: Principal, name: str, scope: str, expires_at: datetime | None = None,
                 for_user=None) -> NewToken:
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
        raise Forbidden(f"a {membership.role} gets read tokens only", role=membership.role)
    secret = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
    with transaction.atomic(durable=True), acting(principal):
        token = ApiToken.objects.create(prefix=secret[: len(TOKEN_PREFIX) + 8], digest=_digest(secret), user=owner,
                                        tenant_id=principal.tenant, name=name.strip(), scope=scope,
                                        expires_at=expires_at, created_by=principal.actor)
        audit_record(actor=principal.actor, tenant=principal.tenant, kind="token.created",
                     data={"token": token.prefix, "name": token.name, "scope": scope, "for": owner.get_username(),
                           "expires_at": expires_at.isoformat() if expires_at else None})
    return NewToken(token, secret)


def token_revoke(*, principal: Principal, token_id: int) -> ApiToken:
    """Revoke a token of the principal's own (or, for an admin, anyone's in the tenant).
    Refused from then on. Revoking a revoked token is an error, not a second event."""
    token = tokens_visible_to(principal).filter(id=arguments.bounded("token", token_id, minimum=1,
                                                                      maximum=2**63 - 1)).first()
    if token is None:
        raise TokenNotFound(f"no token {token_id}", token=token_id)
    with transaction.atomic(durable=True), acting(principal):
        won = ApiToken.objects.filter(id=token.id, revoked_at__isnull=True).update(revoked_at=Now(),
                                                                                  revoked_by=principal.actor)
        if not won:  # revoked already, by this person or another
            raise InvalidTransition(f"token {token.prefix}… is already revoked", token=token.prefix)
        audit_record(actor=principal.actor, tenant=principal.tenant, kind="token.revoked",
                     data={"token": token.prefix, "name": token.name, "owner": token.user.get_username()})
    token.refresh_from_db()
    return token


def tokens_visible_to(principal: Principal):
    """A person sees their own tokens in the tenant; an admin sees everyone's there."""
    tokens = ApiToken.objects.filter(tenant_id=principal.tenant).select_related("user").order_by("-id")
    return tokens if principal.may(ADMINISTER) else tokens.filter(user=principal.user)


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


# --- members (admins) -----------------------------------------------------------------------


def member_set_role(*, principal: Principal, username: str, role: str, tenant_name: str | None = None) -> Membership:
    """Add a person to the principal's tenant or change their role (admins only), audited."""
    require(principal, ADMINISTER)
    if role not in ROLES:
        raise InvalidArgument(f"role must be one of {', '.join(ROLES)}", field="role")
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise PersonNotFound(f"no person {username!r}", person=username)
    with transaction.atomic(durable=True), acting(principal):
        Tenant.objects.get_or_create(slug=principal.tenant, defaults={"name": tenant_name or principal.tenant})
        membership, created = Membership.objects.update_or_create(user=user, tenant_id=principal.tenant,
                                                                  defaults={"role": role})
        audit_record(actor=principal.actor, tenant=principal.tenant, kind="member.role",
                     data={"person": username, "role": role, "added": created})
    return membership
