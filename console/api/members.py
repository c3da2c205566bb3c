"""Members of the tenant: list (every member), add or change a role, remove (admins).

Changing members is an action and an administration at once: it needs an admin's
`operate` token (a read token, or an operator's, is FORBIDDEN), so a leaked read token of
an admin cannot hand the tenant to someone else.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from ninja import Path, Query, Router, Schema
from pydantic import Field

from console.access import member_remove, member_set_role, members_of
from console.api.auth import operating, principal
from console.api.errors import refuses
from console.api.schemas import Body
from console.models import ROLES
from runtime.errors import Forbidden, InvalidString, InvalidTransition, LastAdmin, MemberNotFound, PersonNotFound

router = Router(tags=["members"])


# auth_user.username: up to 150 of letters, digits and @.+-_ (Django's validator).
def username_path():
    return Path(..., min_length=1, max_length=150, pattern=r"^[\w.@+-]+$", description="the person's username")


class MemberOut(Schema):
    username: str
    role: Literal[ROLES]
    since: datetime = Field(description="when they joined this tenant")
    last_login: datetime | None = Field(description="their last console sign-in, any tenant; null: never")


class RoleIn(Body):
    role: Literal[ROLES]
    reason: str = Field("", max_length=2000, description="kept in the audit row")


class RemovedOut(Schema):
    username: str
    role: Literal[ROLES] = Field(description="the role they had")
    tokens_revoked: list[str] = Field(description="prefixes of their tokens for this tenant, revoked with them")


def member_out(membership) -> dict:
    return {
        "username": membership.user.get_username(),
        "role": membership.role,
        "since": membership.created_at,
        "last_login": membership.user.last_login,
    }


@router.get("/members", response={200: list[MemberOut]}, summary="The tenant's members")
def list_members(request):
    return [member_out(m) for m in members_of(principal(request))]


@router.put("/members/{username}", response={200: MemberOut}, summary="Add a person or change a role")
@refuses(Forbidden, PersonNotFound, LastAdmin, InvalidTransition, InvalidString)
def put_member(request, body: RoleIn, username: str = username_path()):
    """An existing person (PERSON_NOT_FOUND otherwise) joins with the role, or a member
    takes it on from their next request. The same role again changes nothing. Demoting
    the tenant's last admin is LAST_ADMIN (409)."""
    with operating(request) as who:
        membership = member_set_role(principal=who, username=username, role=body.role, reason=body.reason)
    membership.refresh_from_db()  # created_at is the database's clock
    return member_out(membership)


@router.delete("/members/{username}", response={200: RemovedOut}, summary="Remove a member")
@refuses(Forbidden, MemberNotFound, LastAdmin, InvalidTransition, InvalidString)
def delete_member(
    request,
    username: str = username_path(),
    reason: str = Query("", max_length=2000, description="kept in the audit row"),
):
    """They lose access at once, in the console and the API, and their tokens for this
    tenant are revoked. Removing the tenant's last admin is LAST_ADMIN (409)."""
    with operating(request) as who:
        removed = member_remove(principal=who, username=username, reason=reason)
    return {"username": removed.person, "role": removed.role, "tokens_revoked": removed.tokens_revoked}
