"""A tenant's members (admins change them): who belongs, with which role, and what a
role change or a removal touches. Every change locks the tenant row first and writes its
audit row in the same transaction."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now

from console.access.principals import ADMINISTER, Principal, acting, require
from console.models import ADMIN, OPERATE, ROLES, ApiToken, Membership, Tenant
from runtime import arguments
from runtime.authz.services import SEED
from runtime.errors import InvalidArgument, InvalidTransition, LastAdmin, MemberNotFound, PersonNotFound, TenantNotFound
from runtime.trail.selectors import tenant_chain_events
from runtime.trail.services import AuditKind, audit_record

USERNAME_MAX = 150  # auth_user.username


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


# --- the demo's seed (console/dev/demo/seed.py, debug only) ----------------------------------
# What the seed makes, it makes once and as the seed (SEED), never in a person's name: and
# never again after a person changed or took it away, which the tenant's own audit chain
# says (every membership and steward change is audited there, the seed's own included).


def member_seed(*, tenant: str, username: str, role: str) -> bool:
    """Make a demo person a member of `tenant` with `role`, unless they are one, or the
    tenant's trail holds any membership event of theirs: added by the seed before and
    since removed, or changed by an admin. Audited `member.added` by the seed. Returns
    whether the membership was made."""
    user = get_user_model().objects.get(username=_username(username))
    with transaction.atomic(durable=True):
        _lock_members(tenant)
        if Membership.objects.filter(user=user, tenant_id=tenant).exists() or any(
            event.data.get("person") == username
            for event in tenant_chain_events(
                tenant=tenant, kinds=[AuditKind.MEMBER_ADDED, AuditKind.MEMBER_ROLE, AuditKind.MEMBER_REMOVED]
            )
        ):
            return False
        Membership.objects.create(user=user, tenant_id=tenant, role=role)
        audit_record(
            actor=SEED,
            tenant=tenant,
            kind=AuditKind.MEMBER_ADDED,
            data={"person": username, "role": role, "reason": "demo seed"},
        )
    return True
