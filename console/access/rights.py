"""Rights finer than a role, per agent (django-guardian object permissions on its
AgentIdentity row): whose grants an operator may change, and who decides an agent's
approval requests once an admin named its approvers."""

from __future__ import annotations

from django.db import transaction
from guardian.shortcuts import assign_perm, get_users_with_perms, remove_perm

from console.access.members import _lock_members, member_of
from console.access.principals import ADMINISTER, OPERATE_ACTION, Principal, acting, require
from console.models import APPROVE_AGENT_REQUESTS, CHANGE_AGENT_GRANTS, OPERATOR, AgentIdentity, Membership
from runtime import arguments
from runtime.authz.services import SEED
from runtime.errors import Forbidden, InvalidArgument
from runtime.trail.selectors import tenant_chain_events
from runtime.trail.services import AuditKind, audit_record

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


def agent_steward_seed(*, tenant: str, name: str, username: str) -> bool:
    """Give a demo operator the right over one agent's grants in `tenant`, unless the
    tenant's trail holds any event of that right for them (given by the seed before, or
    by an admin, or taken away since). Audited `agent.steward_added` by the seed.
    Returns whether the right was given."""
    agent = f"{AGENT_PREFIX}{arguments.identifier('agent', name, max_length=200)}"
    with transaction.atomic(durable=True):
        _lock_members(tenant)
        membership = Membership.objects.filter(tenant_id=tenant, user__username=username).select_related("user").first()
        if membership is None or membership.role != OPERATOR:
            return False  # a person removed them, or made them something else: theirs to decide
        if any(
            (event.data.get("agent"), event.data.get("person")) == (agent, username)
            for event in tenant_chain_events(
                tenant=tenant, kinds=[AuditKind.AGENT_STEWARD_ADDED, AuditKind.AGENT_STEWARD_REMOVED]
            )
        ):
            return False
        identity = AgentIdentity.objects.get_or_create(tenant_id=tenant, name=name)[0]
        if _holds(membership.user, identity):
            return False
        assign_perm(_PERM, membership.user, identity)
        audit_record(
            actor=SEED,
            tenant=tenant,
            kind=AuditKind.AGENT_STEWARD_ADDED,
            data={"agent": agent, "person": username, "reason": "demo seed"},
        )
    return True
