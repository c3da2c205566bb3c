"""Who may see and do what: the one access module of the web side.

Every view, htmx fragment and API route asks this module, in three steps:

1. *Who is this?* A console session (the person and the tenant they switched to) or an
   API token (`Authorization: Bearer stw_...`: its person, its tenant and its scope) is
   turned into a `Principal`, or refused with AUTH_REQUIRED (401).
2. *May they?* `require(principal, OPERATE)`: a viewer, or a read token, gets FORBIDDEN
   (403) on an action; only an admin administers (members, other people's tokens).
   Grants are one step finer: an admin changes any grant of the tenant, an operator only
   an agent's whose identity an admin gave them the right over (a django-guardian object
   permission on its AgentIdentity row: `may_change_grants`); a viewer, a read token
   and anything that is not a person never do.
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
from guardian.shortcuts import assign_perm, get_users_with_perms, remove_perm

from console.models import (
    ADMIN,
    APPROVE_AGENT_REQUESTS,
    CHANGE_AGENT_GRANTS,
    OPERATE,
    OPERATOR,
    READ,
    ROLES,
    SCOPES,
    VIEWER,
    AgentIdentity,
    ApiToken,
    Membership,
    Tenant,
)
from runtime import arguments
from runtime.errors import (
    Forbidden,
    InvalidArgument,
    InvalidTransition,
    LastAdmin,
    MemberNotFound,
    PersonNotFound,
    TenantNotFound,
    TokenNotFound,
    Unauthenticated,
)
from runtime.trail.services import AuditKind, acting_through, audit_record

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
USERNAME_MAX = 150  # auth_user.username


@dataclass(frozen=True)
class Principal:
    user: AbstractBaseUser
    tenant: str
    role: str
    channel: str  # "console" or "api"
    scope: str  # OPERATE for a session; a token's own scope
    credential: str  # "session:<id>" or "token:<prefix>", as audit rows name it

    @property
    def actor(self) -> str:
        return f"user:{self.user.get_username()}"

    def may(self, action: str) -> bool:
        if action != READ_ACTION and self.scope == READ:
            return False
        return _RANK[self.role] >= _RANK[_NEEDS[action]]


def require(principal: Principal, action: str) -> Principal:
    if not principal.may(action):
        why = (
            "this token is read-only"
            if principal.scope == READ and action != READ_ACTION
            else f"a {principal.role} of {principal.tenant} may not {action}"
        )
        raise Forbidden(f"{why}", action=action, role=principal.role, scope=principal.scope)
    return principal


def person_principal(user, tenant: str, *, channel: str, credential: str) -> Principal:
    """A person acting in `tenant` through another door (the Django admin): their
    membership there decides, exactly as for a session. No membership: not found."""
    membership = Membership.objects.filter(user=user, tenant_id=tenant).first()
    if membership is None or not user.is_active:
        raise TenantNotFound(f"{user.get_username()} is no member of {tenant!r}", tenant=tenant)
    return Principal(
        user=user, tenant=tenant, role=membership.role, channel=channel, scope=OPERATE, credential=credential
    )


@dataclass(frozen=True)
class AdminScope:
    """What a signed-in person reads in the Django admin (console/admin.py asks this, once
    per request, and turns it into each model's query):

    * `tenants`: the tenants where they hold READ_ACTION as a member (every role does, as
      in the console), or None for an active superuser, who administers the deployment and
      reads every tenant's rows. Reading is all a superuser gets: a change made from the
      admin asks the person's right in the row's own tenant (person_principal,
      require_grant_change), superuser or not;
    * `fleet`: whether they read the fleet-wide records, pools and their free slots: every
      member does, as every member reads /pools/ (console/ui/pools.py);
    * `people`: the people they read: the members of those tenants, as every member reads
      the tenant's members (members_of); the groups and the changes to a person (password,
      staff, superuser, permissions), which belong to the deployment, only a superuser.
    """

    tenants: frozenset[str] | None

    @property
    def everything(self) -> bool:
        return self.tenants is None

    @property
    def fleet(self) -> bool:
        return self.tenants is None or bool(self.tenants)

    def people(self):
        """The ids of the people in scope, as a subquery (None: everyone)."""
        if self.tenants is None:
            return None
        return Membership.objects.filter(tenant_id__in=self.tenants).values("user_id")


def admin_scope(user) -> AdminScope:
    if not user.is_authenticated or not user.is_active:
        return AdminScope(tenants=frozenset())
    if user.is_superuser:
        return AdminScope(tenants=None)
    reads = (
        Principal(user=user, tenant=m.tenant_id, role=m.role, channel="admin", scope=OPERATE, credential="")
        for m in tenants_of(user)
    )
    return AdminScope(tenants=frozenset(p.tenant for p in reads if p.may(READ_ACTION)))


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
    return Principal(
        user=user,
        tenant=membership.tenant_id,
        role=membership.role,
        channel="console",
        scope=OPERATE,
        credential=f"session:{hashlib.sha256(key.encode()).hexdigest()[:12]}",
    )


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
        raise Forbidden(f"a {membership.role} gets read tokens only", role=membership.role)
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


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


# --- members (admins) -----------------------------------------------------------------------


@dataclass(frozen=True)
class MemberImpact:
    """What a role change or a removal would touch, for the page that asks first."""

    tokens: list[ApiToken]  # live (not revoked, not expired) for this tenant: what a removal revokes
    last_admin: bool  # the tenant's only admin: demoting or removing them is refused

    @property
    def operate_tokens(self) -> int:
        """Operate tokens act as read tokens while their owner is a viewer (Principal.may)."""
        return sum(1 for token in self.tokens if token.scope == OPERATE)


def members_of(principal: Principal) -> list[Membership]:
    """The tenant's members, by username, with their person (last sign-in) joined. Every
    member may read who else belongs to the tenant."""
    return list(Membership.objects.filter(tenant_id=principal.tenant).select_related("user").order_by("user__username"))


def member_of(principal: Principal, username: str) -> Membership:
    """One member of the principal's tenant; a person who is not one (or does not exist)
    is MEMBER_NOT_FOUND alike, so the answer says nothing about other tenants."""
    username = _username(username)
    membership = (
        Membership.objects.filter(tenant_id=principal.tenant, user__username=username).select_related("user").first()
    )
    if membership is None:
        raise MemberNotFound(f"no member {username[:40]!r} in {principal.tenant}", person=username)
    return membership


def member_impact(membership: Membership) -> MemberImpact:
    return MemberImpact(
        tokens=list(_live_tokens(membership).order_by("id")),
        last_admin=membership.role == ADMIN and not _other_admins(membership).exists(),
    )


def member_set_role(*, principal: Principal, username: str, role: str, reason: str = "") -> Membership:
    """Add an existing person to the principal's tenant, or change a member's role (admins only).

    1. Refuse a non-admin, an unknown role, an unknown person.
    2. Lock the tenant row: every change of its memberships queues behind it, so two
       admins demoting each other at once cannot both see the other still an admin.
    3. Refuse demoting the last admin (LAST_ADMIN): nobody could manage the tenant after.
    4. Write the role with a conditional UPDATE on the role read under the lock, and the
       audit row (`member.added` or `member.role`, with the reason) in the same transaction.
    The same role again changes nothing and writes no event (PUT is idempotent).
    """
    require(principal, ADMINISTER)
    if role not in ROLES:
        raise InvalidArgument(f"role must be one of {', '.join(ROLES)}", field="role")
    reason = arguments.text("reason", reason or "").strip()
    username = _username(username)
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise PersonNotFound(f"no person {username[:40]!r}", person=username)
    with transaction.atomic(durable=True), acting(principal):
        _lock_members(principal.tenant)
        membership = Membership.objects.filter(user=user, tenant_id=principal.tenant).first()
        if membership is None:
            membership = Membership.objects.create(user=user, tenant_id=principal.tenant, role=role)
            audit_record(
                actor=principal.actor,
                tenant=principal.tenant,
                kind=AuditKind.MEMBER_ADDED,
                data={"person": username, "role": role, "reason": reason},
            )
            return membership
        before = membership.role
        if before == role:
            return membership
        if before == ADMIN and not _other_admins(membership).exists():
            raise LastAdmin(
                f"{username} is the last admin of {principal.tenant}: make another admin first",
                person=username,
                tenant=principal.tenant,
            )
        won = Membership.objects.filter(id=membership.id, role=before).update(role=role) == 1
        if not won:  # a writer that bypasses the lock (the Django admin) changed it first
            raise InvalidTransition(f"{username}'s role changed meanwhile", person=username)
        audit_record(
            actor=principal.actor,
            tenant=principal.tenant,
            kind=AuditKind.MEMBER_ROLE,
            data={"person": username, "from": before, "role": role, "reason": reason},
        )
    membership.refresh_from_db()
    return membership


@dataclass(frozen=True)
class Removed:
    person: str
    role: str
    tokens_revoked: list[str]  # the prefixes of the tokens the removal revoked


def member_remove(*, principal: Principal, username: str, reason: str = "") -> Removed:
    """Remove a member from the principal's tenant (admins only).

    1. Find the member (MEMBER_NOT_FOUND otherwise: a member list is every member's to
       read, so this 404 before the 403 tells nobody anything new), then refuse a non-admin.
    2. Lock the tenant row (as member_set_role) and refuse removing the last admin.
    3. Delete the membership conditionally on the role read under the lock: the caller
       learns whether this removal won.
    4. Revoke the person's live tokens for this tenant. token_principal already refuses a
       token whose owner is no member, but a later re-invitation must not wake old tokens.
    5. The audit row `member.removed` names the tokens revoked and the reason, in the
       same transaction.
    """
    membership = member_of(principal, username)
    require(principal, ADMINISTER)
    reason = arguments.text("reason", reason or "").strip()
    with transaction.atomic(durable=True), acting(principal):
        _lock_members(principal.tenant)
        membership = Membership.objects.filter(id=membership.id).select_related("user").first()
        if membership is None:  # removed by another admin while we looked
            raise MemberNotFound(f"no member {username[:40]!r} in {principal.tenant}", person=username)
        if membership.role == ADMIN and not _other_admins(membership).exists():
            raise LastAdmin(
                f"{username} is the last admin of {principal.tenant}: make another admin first",
                person=username,
                tenant=principal.tenant,
            )
        won = Membership.objects.filter(id=membership.id, role=membership.role).delete()[0] == 1
        if not won:  # a writer that bypasses the lock (the Django admin) changed it first
            raise InvalidTransition(f"{username}'s membership changed meanwhile", person=username)
        live = _live_tokens(membership)
        revoked = list(live.order_by("id").values_list("prefix", flat=True))
        live.update(revoked_at=Now(), revoked_by=principal.actor)
        audit_record(
            actor=principal.actor,
            tenant=principal.tenant,
            kind=AuditKind.MEMBER_REMOVED,
            data={"person": username, "role": membership.role, "tokens_revoked": revoked, "reason": reason},
        )
    return Removed(person=username, role=membership.role, tokens_revoked=revoked)


def _username(value) -> str:
    # auth_user.username is 150 characters; a NUL could not even be sent to PostgreSQL.
    return arguments.identifier("person", value, max_length=USERNAME_MAX)


def _lock_members(tenant: str) -> None:
    # SELECT ... FOR UPDATE on the tenant: the one row every membership change of the
    # tenant locks first. Locking the admin rows instead would miss a concurrent
    # promotion-then-demotion pair; the tenant row is one lock and cheap (changes are rare).
    if not Tenant.objects.select_for_update().filter(slug=tenant).exists():
        raise TenantNotFound(f"no tenant {tenant!r}", tenant=tenant)


def _other_admins(membership: Membership):
    return Membership.objects.filter(tenant_id=membership.tenant_id, role=ADMIN).exclude(id=membership.id)


def _live_tokens(membership: Membership):
    return ApiToken.objects.filter(
        user_id=membership.user_id, tenant_id=membership.tenant_id, revoked_at__isnull=True
    ).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=Now()))


# --- grants: who may change whose -----------------------------------------------------------

AGENT_PREFIX = "agent:"
_PERM = f"console.{CHANGE_AGENT_GRANTS}"


def may_change_grants(principal: Principal, grant_principal: str) -> bool:
    """Whether the principal may create, narrow or revoke grants of `grant_principal`
    (`agent:<name>` or `user:<name>`) in their tenant. Admins (with an operate
    credential) may change any; an operator only an agent's whose identity in this
    tenant they were given CHANGE_AGENT_GRANTS on; a person's own or anyone's owner
    grants only an admin. Read tokens and viewers never (Principal.may)."""
    if not principal.may(OPERATE_ACTION):
        return False
    if principal.may(ADMINISTER):
        return True
    if not isinstance(grant_principal, str) or not grant_principal.startswith(AGENT_PREFIX):
        return False
    identity = AgentIdentity.objects.filter(
        tenant_id=principal.tenant, name=grant_principal[len(AGENT_PREFIX) :]
    ).first()
    # ObjectPermissionChecker, not user.has_perm: a superuser passes has_perm for every
    # object, and being a superuser of the Django admin is no right over a tenant's agents.
    return identity is not None and _holds(principal.user, identity)


def _holds(user, identity: AgentIdentity, codename: str = CHANGE_AGENT_GRANTS) -> bool:
    from guardian.models import UserObjectPermission

    return UserObjectPermission.objects.filter(
        user=user,
        permission__codename=codename,
        permission__content_type__app_label="console",
        object_pk=str(identity.pk),
    ).exists()


def require_approval_right(principal: Principal, agent: str) -> Principal:
    """Whether the principal may approve or deny `agent`'s requests in their tenant: an
    operator (or admin) with an operate credential; and once an admin named approvers for
    that agent (APPROVE_AGENT_REQUESTS on its identity, a guardian object permission),
    only those operators and the admins. The runtime then refuses the task's own starter
    (separation of duties) and anything that is not a person."""
    require(principal, OPERATE_ACTION)
    if principal.may(ADMINISTER):
        return principal
    identity = AgentIdentity.objects.filter(tenant_id=principal.tenant, name=agent).first()
    if identity is None or _holds(principal.user, identity, APPROVE_AGENT_REQUESTS):
        return principal
    from guardian.models import UserObjectPermission

    named = UserObjectPermission.objects.filter(
        permission__codename=APPROVE_AGENT_REQUESTS,
        permission__content_type__app_label="console",
        object_pk=str(identity.pk),
    ).exists()
    if named:
        raise Forbidden(
            f"only the approvers an admin named for agent:{agent} decide its requests",
            action="approve",
            role=principal.role,
            agent=arguments.show(agent),
        )
    return principal


def require_grant_change(principal: Principal, grant_principal: str) -> Principal:
    if not may_change_grants(principal, grant_principal):
        if not principal.may(OPERATE_ACTION):
            require(principal, OPERATE_ACTION)  # the viewer's or read token's own message
        what = (
            "people's grants"
            if not str(grant_principal).startswith(AGENT_PREFIX)
            else f"{arguments.show(grant_principal)}'s grants"
        )
        raise Forbidden(
            f"a {principal.role} of {principal.tenant} may not change {what}: an admin gives an "
            f"operator that right per agent",
            action="change_grants",
            role=principal.role,
            principal=arguments.show(grant_principal),
        )
    return principal


def agent_identity(principal: Principal, name: str, *, create: bool = False) -> AgentIdentity | None:
    """The agent's identity row in the principal's tenant (None if not made yet)."""
    arguments.identifier("agent", name, max_length=200)
    if create:
        return AgentIdentity.objects.get_or_create(tenant_id=principal.tenant, name=name)[0]
    return AgentIdentity.objects.filter(tenant_id=principal.tenant, name=name).first()


def agent_stewards(principal: Principal, name: str) -> list[str]:
    """The usernames given the right over this agent's grants in the principal's tenant."""
    identity = agent_identity(principal, name)
    if identity is None:
        return []
    users = get_users_with_perms(identity, only_with_perms_in=[CHANGE_AGENT_GRANTS], with_superusers=False)
    return sorted(u.get_username() for u in users)


def agent_steward_set(*, principal: Principal, name: str, username: str, allowed: bool, reason: str = "") -> bool:
    """Give (or take) an operator of the tenant the right over one agent's grants
    (admins only). Audited as `agent.steward_added` / `agent.steward_removed`; returns
    whether anything changed (giving it twice changes nothing and writes no event)."""
    require(principal, ADMINISTER)
    reason = arguments.text("reason", reason or "").strip()
    membership = member_of(principal, username)
    if allowed and membership.role != OPERATOR:
        raise InvalidArgument(
            f"{membership.user.get_username()} is {membership.role} of {principal.tenant}: the "
            "right is for operators (admins change every grant; viewers none)",
            field="username",
        )
    with transaction.atomic(durable=True), acting(principal):
        _lock_members(principal.tenant)
        identity = agent_identity(principal, name, create=True)
        if _holds(membership.user, identity) == allowed:
            return False
        (assign_perm if allowed else remove_perm)(_PERM, membership.user, identity)
        audit_record(
            actor=principal.actor,
            tenant=principal.tenant,
            kind=AuditKind.AGENT_STEWARD_ADDED if allowed else AuditKind.AGENT_STEWARD_REMOVED,
            data={"agent": f"{AGENT_PREFIX}{name}", "person": membership.user.get_username(), "reason": reason},
        )
    return True
