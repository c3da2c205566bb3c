"""A person's page as an owner: the grants they hold in this tenant (every task they
own is bounded by them) and the live tasks acting on their authority."""

from __future__ import annotations

from console.access import may_change_grants, member_of
from console.ui.web import page, screen
from runtime.authz.selectors import grants_of, tasks_under


@screen
def owner_page(request, principal, username):
    member = member_of(principal, username)  # not a member of this tenant: 404
    who = f"user:{member.user.get_username()}"
    return page(
        request,
        principal,
        "console/owner.html",
        {
            "member": member,
            "who": who,
            "grants": grants_of(tenant=principal.tenant, principal=who, live_only=False),
            "tasks": tasks_under(tenant=principal.tenant, principal=who),
            "may_change": may_change_grants(principal, who),
        },
        nav="grants",
    )
