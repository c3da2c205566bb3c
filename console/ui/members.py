"""Members of the tenant: who belongs with what role, since when, last signed in (every
member reads it); an admin adds an existing person, and changes a role or removes a
member after a page that says what the change does, with a reason for the audit row."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from console.access import ADMINISTER, member_impact, member_of, member_remove, member_set_role, members_of, require
from console.models import ADMIN, ROLES, VIEWER
from console.ui.web import form_status, page, param, screen
from runtime.errors import InvalidArgument, InvalidTransition, MemberNotFound, StewardError

# What each role may do, in the words the confirmation uses: "bob becomes operator of
# acme: may submit, ...". Each role may do what the ones before it may (console/models.py).
POWERS = {
    VIEWER: "may read everything in the tenant (tasks, effects, pools, the audit trail) and act on nothing",
    "operator": "may submit, cancel, resume, resolve effects and change pool limits",
    ADMIN: "may also add and remove members, change their roles and revoke other people's API tokens",
}
LOST_BY_ADMIN = "manage members or other people's API tokens"


def _list(request, principal, *, typed=None, error=None, status=200):
    return page(
        request,
        principal,
        "console/members.html",
        {
            "members": members_of(principal),
            "roles": ROLES,
            "can_administer": principal.may(ADMINISTER),
            "typed": typed or {},
            "error": error,
        },
        status=status,
        nav="members",
    )


@screen
def member_list(request, principal):
    return _list(request, principal)


@require_POST
@screen
def member_add(request, principal):
    """Add an existing person with a role. Someone already a member is refused here: a
    role change goes through its own confirmation, never through this form."""
    require(principal, ADMINISTER)
    typed = {k: param(request, k, request.POST) or "" for k in ("username", "role")}
    try:
        if not typed["username"]:
            raise InvalidArgument("name the person to add by their username", field="username")
        try:
            known = member_of(principal, typed["username"])
        except MemberNotFound:
            known = None
        if known is not None:
            raise InvalidTransition(
                f"{known.user.get_username()} is already {known.role} of {principal.tenant}: "
                "change the role from the list",
                person=typed["username"],
            )
        added = member_set_role(principal=principal, username=typed["username"], role=typed["role"])
    except StewardError as exc:
        return _list(request, principal, typed=typed, error=exc, status=form_status(exc))
    messages.success(request, f"{added.user.get_username()} joined {principal.tenant} as {added.role}.")
    return redirect("ui:members")


def _confirm(request, principal, username: str, action: str):
    """GET: what the change does (for whom, the powers gained or lost, the tokens it
    touches, a refusal it would meet). POST: do it, with the optional reason; on a
    refusal the same page again with the message and what was typed, status 4xx."""
    membership = member_of(principal, username)  # 404 first: the list is every member's to read
    require(principal, ADMINISTER)
    source = request.POST if request.method == "POST" else request.GET
    role = param(request, "role", source) or ""
    if action == "role" and role not in ROLES:
        raise InvalidArgument(f"role must be one of {', '.join(ROLES)}", field="role")
    context = {
        "member": membership,
        "action": action,
        "role": role,
        "powers": POWERS.get(role, ""),
        "lost": LOST_BY_ADMIN if membership.role == ADMIN and role != ADMIN else "",
        "is_self": membership.user_id == principal.user.pk,
        "reason": "",
        "error": None,
    }
    if request.method == "POST":
        context["reason"] = (request.POST.get("reason") or "").strip()
        try:
            if action == "role":
                member_set_role(principal=principal, username=username, role=role, reason=context["reason"])
                messages.success(request, f"{username} is now {role} of {principal.tenant}.")
            else:
                removed = member_remove(principal=principal, username=username, reason=context["reason"])
                n = len(removed.tokens_revoked)
                messages.success(
                    request,
                    f"{username} no longer belongs to {principal.tenant}; {n} token{'s' if n != 1 else ''} revoked.",
                )
            return redirect("ui:members")
        except StewardError as exc:
            if exc.status == 404:  # removed by another admin meanwhile: nothing left to confirm
                raise
            context["error"] = exc
            return page(
                request,
                principal,
                "console/member_confirm.html",
                {**context, "impact": member_impact(membership)},
                status=form_status(exc),
                nav="members",
            )
    return page(
        request,
        principal,
        "console/member_confirm.html",
        {**context, "impact": member_impact(membership)},
        nav="members",
    )


@screen
def member_role(request, principal, username):
    return _confirm(request, principal, username, "role")


@screen
def member_remove_view(request, principal, username):
    return _confirm(request, principal, username, "remove")
