"""Grants: the tenant's list with its filters in the URL (principal, action, resource,
state), each grant's own page with its history (created, narrowed, revoked: by whom,
when, why), and creating one with a resource pattern and an expiry. Who may change
which grant is console/access/rights.py's (may_change_grants)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from console.access import OPERATE_ACTION, acting, may_change_grants, require, require_grant_change
from console.ui.web import form_status, kept, listing, page, screen, typed_from, when
from runtime.authz.selectors import GRANT_STATES, grant_get, grant_history, grants_filtered
from runtime.authz.services import grant_create
from runtime.errors import InvalidArgument, StewardError

FILTERS = ("principal", "action", "resource", "state")


@screen
def grant_list(request, principal):
    shown = kept(request, FILTERS)
    form = {"grants": [], "filters": shown, "state": shown["state"] or "live", "states": GRANT_STATES}

    def read() -> dict:
        typed = typed_from(request.GET, FILTERS)
        state = typed["state"] or "live"
        grants = grants_filtered(
            tenant=principal.tenant,
            principal=typed["principal"] or None,
            action=typed["action"] or None,
            resource=typed["resource"] or None,
            state=state,
        )
        return {"grants": grants, "filters": typed, "state": state}

    return listing(request, principal, "console/grants.html", form, read, nav="grants")


@screen
def grant_page(request, principal, grant_id):
    grant = grant_get(grant_id=grant_id, tenant=principal.tenant)
    return page(
        request,
        principal,
        "console/grant.html",
        {"grant": grant, "history": grant_history(grant), "may_change": may_change_grants(principal, grant.principal)},
        nav="grants",
    )


@screen
def grant_new(request, principal):
    """GET: the form (principal prefilled from ?principal=). POST: create it; a refusal
    shows the form again with what was typed and the message, status 4xx."""
    require(principal, OPERATE_ACTION)
    source = request.POST if request.method == "POST" else request.GET
    fields = ("principal", "action", "resource", "expires_at")
    context = {"typed": {k: (source.get(k) or "").strip()[:600] for k in fields}, "error": None}
    if request.method != "POST":
        return page(request, principal, "console/grant_new.html", context, nav="grants")
    try:
        typed = typed_from(request.POST, fields)
        if not typed["principal"]:
            raise InvalidArgument("whose grant? agent:<name> or user:<name>", field="principal")
        require_grant_change(principal, typed["principal"])
        expires = when(typed["expires_at"] or None, "expires_at")
        with acting(principal):
            grant = grant_create(
                tenant=principal.tenant,
                principal=typed["principal"],
                action=typed["action"],
                resource=typed["resource"],
                expires_at=expires,
                actor=principal.actor,
            )
    except StewardError as exc:
        if exc.status == 403:
            raise
        context["error"] = exc
        return page(request, principal, "console/grant_new.html", context, status=form_status(exc), nav="grants")
    messages.success(
        request, f"Granted {grant.principal} {grant.action} on {grant.resource} (authz revision {grant.revision})."
    )
    return redirect("ui:grant", grant.id)
