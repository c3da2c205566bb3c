"""API tokens: the person's own in this tenant (an admin sees everyone's), made with a
name, a scope and an optional expiry, the secret shown once; and revoked at once. Every
member makes and revokes their own: a viewer only `read` ones (console/access/tokens.py)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from console.access import OPERATE_ACTION, token_create, token_revoke, tokens_visible_to
from console.models import READ, SCOPES
from console.ui.web import form_status, page, param, screen, when
from runtime.errors import InvalidInput, StewardError, TokenNotFound


def _context(principal, **extra) -> dict:
    return {
        "tokens": list(tokens_visible_to(principal)[:200]),
        "scopes": SCOPES if principal.may(OPERATE_ACTION) else (READ,),
        "typed": {},
        "error": None,
        "made": None,
        **extra,
    }


@screen
def token_list(request, principal):
    return page(request, principal, "console/tokens.html", _context(principal), nav="tokens")


@require_POST
@screen
def token_new(request, principal):
    typed = {k: param(request, k, request.POST) or "" for k in ("name", "scope", "expires_at")}
    try:
        expires = when(typed["expires_at"] or None, "expires_at")
        if typed["scope"] not in SCOPES:
            raise InvalidInput(f"scope must be one of {', '.join(SCOPES)}", field="scope")
        made = token_create(principal=principal, name=typed["name"], scope=typed["scope"], expires_at=expires)
    except StewardError as exc:
        return page(
            request,
            principal,
            "console/tokens.html",
            _context(principal, typed=typed, error=exc),
            status=form_status(exc),
            nav="tokens",
        )
    # The secret exists only in this response: no redirect, nothing stored to show it again.
    response = page(request, principal, "console/tokens.html", _context(principal, made=made), status=201, nav="tokens")
    response["Cache-Control"] = "no-store"
    return response


@screen
def token_revoke_view(request, principal, token_id):
    """GET: what revoking will do (the token, its owner, scope and last use; every program
    using it refused from its next request on), and the button. POST: revoke it. Only a
    token the person sees (their own; an admin: anyone's here), whatever their role."""
    token = tokens_visible_to(principal).filter(id=token_id).first() if 1 <= token_id < 2**63 else None
    if token is None:
        raise TokenNotFound(f"no token {token_id}", token=token_id)
    if request.method != "POST":
        return page(request, principal, "console/token_revoke.html", {"token": token}, nav="tokens")
    try:
        token = token_revoke(principal=principal, token_id=token_id)
    except StewardError as exc:
        if exc.status == 404:
            raise
        return page(
            request,
            principal,
            "console/token_revoke.html",
            {"token": token, "error": exc},
            status=form_status(exc),
            nav="tokens",
        )
    messages.success(request, f"Revoked {token.name} ({token.prefix}…): refused from its next request on.")
    return redirect("ui:tokens")
