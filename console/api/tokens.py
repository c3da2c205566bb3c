"""API tokens: list, create (the secret is answered once), revoke.

Making or revoking a token is an action: it needs an operate token, so a leaked read
token can neither mint a stronger one nor outlive its own revocation through a new one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.contrib.auth import get_user_model
from ninja import Path, Router, Schema, Status
from pydantic import Field

from console.access import token_create, token_page, token_revoke
from console.api.auth import operating, principal
from console.api.errors import refuses
from console.api.schemas import Body, Int, Moment, Name, Page, cursor_query, limit_query, page_of
from console.models import SCOPES
from runtime.errors import Forbidden, InvalidArgument, InvalidInput, InvalidString, InvalidTransition, TokenNotFound

router = Router(tags=["tokens"])


class TokenOut(Schema):
    id: int
    prefix: str = Field(description="the public start of the secret; audit rows name the token by it")
    name: str
    scope: Literal[SCOPES]
    owner: str
    created_at: datetime
    created_by: str
    expires_at: datetime | None
    last_used_at: datetime | None = Field(description="to within a minute")
    revoked_at: datetime | None
    revoked_by: str


class NewTokenOut(TokenOut):
    secret: str = Field(description="shown this once; only its hash is kept")


class TokenCreate(Body):
    name: str = Field(min_length=1, max_length=100)
    scope: Literal[SCOPES] = "read"
    expires_at: Moment | None = Field(None, description="refused from then on; none: until revoked")
    owner: Name | None = Field(None, description="another member's username (admins only)")


def token_out(token) -> dict:
    return {
        "id": token.id,
        "prefix": token.prefix,
        "name": token.name,
        "scope": token.scope,
        "owner": token.user.get_username(),
        "created_at": token.created_at,
        "created_by": token.created_by,
        "expires_at": token.expires_at,
        "last_used_at": token.last_used_at,
        "revoked_at": token.revoked_at,
        "revoked_by": token.revoked_by,
    }


@router.get("/tokens", response={200: Page[TokenOut]}, summary="Your tokens (an admin: the tenant's), newest first")
@refuses(InvalidInput)
def list_tokens(request, cursor: str | None = cursor_query(), limit: Int = limit_query()):
    """Paged like every list (docs/api.md, Pagination); revoked tokens are kept, and listed."""
    return page_of(token_page(principal(request), after=cursor, limit=limit), token_out)


@router.post("/tokens", response={201: NewTokenOut}, summary="Make a token")
@refuses(Forbidden, TokenNotFound, InvalidArgument, InvalidString)
def create(request, body: TokenCreate):
    """An operate token only for a member who may operate, another member's only by an
    admin (FORBIDDEN otherwise); an `owner` who is no member is TOKEN_NOT_FOUND; an expiry
    in the past, or a blank name, INVALID_ARGUMENT."""
    with operating(request) as who:
        owner = None
        if body.owner is not None:
            owner = get_user_model().objects.filter(username=body.owner).first()
            if owner is None:
                raise TokenNotFound("no such member in this tenant", owner=body.owner)
        made = token_create(principal=who, name=body.name, scope=body.scope, expires_at=body.expires_at, for_user=owner)
    made.token.refresh_from_db()  # created_at is the database's clock
    return Status(201, {**token_out(made.token), "secret": made.secret})


def _revoke(request, token_id: int) -> dict:
    with operating(request) as who:
        return token_out(token_revoke(principal=who, token_id=token_id))


@router.post("/tokens/{token_id}/revoke", response={200: TokenOut}, summary="Revoke a token")
@refuses(Forbidden, TokenNotFound, InvalidTransition)
def revoke(request, token_id: Int = Path(..., ge=1, le=2**63 - 1)):
    """Refused from its next request on. Revoking it again is INVALID_TRANSITION (409)."""
    return _revoke(request, token_id)


@router.delete("/tokens/{token_id}", response={200: TokenOut}, summary="Revoke a token (as DELETE)")
@refuses(Forbidden, TokenNotFound, InvalidTransition)
def delete(request, token_id: Int = Path(..., ge=1, le=2**63 - 1)):
    """The token is kept, revoked, for the audit trail: the same as POST .../revoke."""
    return _revoke(request, token_id)
