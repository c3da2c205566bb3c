"""Who is asking, and what their role lets them do: a console session, an API token or
the Django admin turned into a `Principal`; `require` refuses what the role or the
credential's scope does not allow (FORBIDDEN); `acting` files every audit event written
while it acts under the person, the channel and the credential."""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser

from console.models import ADMIN, OPERATE, OPERATOR, READ, VIEWER, Membership
from runtime.errors import Forbidden, TenantNotFound, Unauthenticated
from runtime.trail.services import acting_through

# What a principal asks to do. Reading is every member's; operating (submit, cancel,
# resume, resolve, pool limits) needs an operator and an `operate` credential;
# administering (members, other people's tokens) needs an admin.
READ_ACTION, OPERATE_ACTION, ADMINISTER = "read", "operate", "administer"
_RANK = {VIEWER: 0, OPERATOR: 1, ADMIN: 2}
_NEEDS = {READ_ACTION: VIEWER, OPERATE_ACTION: OPERATOR, ADMINISTER: ADMIN}
SESSION_TENANT = "steward_tenant"


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

    @property
    def manages_fleet(self) -> bool:
        """Whether they manage the fleet (the workers, pools and processes every tenant
        shares), and so read its figures across tenants, as the dashboard's last hour:
        an active superuser, whom docs/deploy.md keeps to the deployment's operators and
        who already reads every tenant's rows in the Django admin (admin_scope). A
        tenant's roles, its admin's included, are that tenant's alone: they read their
        own tenant's figures."""
        return bool(self.user.is_active and self.user.is_superuser)

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
