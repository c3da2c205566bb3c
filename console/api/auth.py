"""API authentication: a bearer token turned into a Principal by the one access module.

Every route but /health needs it. The token row is read on each request (console/access/tokens.py
token_principal), so a revoked or expired token is refused on its next use, not after a
cache expires.
"""

from __future__ import annotations

import contextlib

from django.http import HttpRequest
from ninja.security import HttpBearer

from console.access import OPERATE_ACTION, Principal, acting, require, token_principal


class BearerToken(HttpBearer):
    """`Authorization: Bearer stw_...`. A missing, malformed, unknown, revoked or expired
    token raises AUTH_REQUIRED (401) from token_principal; ninja hands it to the error
    handlers (console/api/errors.py), so the 401 has the same shape as every error."""

    def __call__(self, request: HttpRequest) -> Principal:
        return token_principal(request.headers.get(self.header))

    def authenticate(self, request: HttpRequest, token: str) -> Principal:  # pragma: no cover - __call__ decides
        return token_principal(f"Bearer {token}")


def principal(request: HttpRequest) -> Principal:
    return request.auth


@contextlib.contextmanager
def operating(request: HttpRequest):
    """An action: the principal must operate (a viewer, or a read token, is FORBIDDEN),
    and every audit row written inside names the api channel and the token's prefix."""
    who = require(principal(request), OPERATE_ACTION)
    with acting(who):
        yield who
