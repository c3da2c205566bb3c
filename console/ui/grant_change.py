"""Narrowing or revoking a grant: first a page that says what it will affect (the live
tasks acting under the grant's principal and those below them, their calls in flight,
and what it cannot undo), then the change, with a reason (required) for the audit event.

The preview and the audit event count the same thing with the same selector
(runtime.authz.selectors.tasks_under): the number read here is the number recorded,
unless a task started or finished in between; the page says at which authz revision it
was read, and the message after the change gives the recorded count.
"""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from console.access import acting, require_grant_change
from console.ui.web import form_status, page, screen, typed_from, when
from runtime.authz.selectors import grant_history, revocation_preview
from runtime.authz.services import grant_narrow, grant_revoke
from runtime.errors import InvalidTransition, StewardError


def _confirm(request, principal, grant_id, action: str):
    preview = revocation_preview(tenant=principal.tenant, grant_id=grant_id)  # another tenant's: 404
    grant = preview.grant
    require_grant_change(principal, grant.principal)
    context = {
        "grant": grant,
        "preview": preview,
        "action": action,
        "error": None,
        "typed": {"reason": "", "resource": grant.resource, "expires_at": ""},
    }
    if request.method == "POST":
        try:
            typed = typed_from(request.POST, ("reason", "resource", "expires_at"))
            context["typed"] = typed
            with acting(principal):
                if action == "revoke":
                    grant_revoke(
                        grant_id=grant.id, tenant=principal.tenant, actor=principal.actor, reason=typed["reason"]
                    )
                else:
                    resource = typed["resource"] if typed["resource"] and typed["resource"] != grant.resource else None
                    grant_narrow(
                        grant_id=grant.id,
                        tenant=principal.tenant,
                        resource=resource,
                        expires_at=when(typed["expires_at"] or None, "expires_at"),
                        actor=principal.actor,
                        reason=typed["reason"],
                    )
        except StewardError as exc:
            if exc.status in (403, 404):
                raise
            context["error"] = exc
            return page(
                request, principal, "console/grant_confirm.html", context, status=form_status(exc), nav="grants"
            )
        event = grant_history(grant)[-1]
        n = event.data.get("affected_tasks", 0)
        messages.success(
            request,
            f"{'Revoked' if action == 'revoke' else 'Narrowed'} grant #{grant.id}: "
            f"{n} task{'s' if n != 1 else ''} acting under {grant.principal} "
            f"checked against it from their next action on.",
        )
        return redirect("ui:grant", grant.id)
    if grant.revoked_at is not None:
        context["error"] = InvalidTransition(
            f"grant #{grant.id} was revoked by {grant.revoked_by}: nothing to {action}", status="revoked"
        )
    return page(request, principal, "console/grant_confirm.html", context, nav="grants")


@screen
def grant_revoke_view(request, principal, grant_id):
    return _confirm(request, principal, grant_id, "revoke")


@screen
def grant_narrow_view(request, principal, grant_id):
    return _confirm(request, principal, grant_id, "narrow")
