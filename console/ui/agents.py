"""Agents as principals of the tenant: the list (every registered agent, with its live
grants counted), and one agent's page: its grants, what it may do with each owner, the
live tasks acting under it and its recent decisions, denials marked with their boundary,
and its kill switch (console/ui/stops.py). An admin gives operators the right over this
agent's grants from here."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from console.access import ADMINISTER, agent_steward_set, agent_stewards, may_change_grants, members_of, require
from console.models import OPERATOR
from console.ui.web import page, param, refusal, screen
from runtime.authz.selectors import agent_authority, decisions_page, grants_of, tasks_under
from runtime.errors import InvalidArgument, UnknownAgent
from runtime.stops.selectors import agent_switch, agent_switches
from runtime.tasks.selectors import agent_get, agent_list
from runtime.versions.selectors import version_overview

DECISIONS_SHOWN = 20


@screen
def agent_list_view(request, principal):
    live = grants_of(tenant=principal.tenant)
    counts: dict[str, int] = {}
    for grant in live:
        counts[grant.principal] = counts.get(grant.principal, 0) + 1
    closed = agent_switches(tenant=principal.tenant)
    agents = [
        {"info": info, "grants": counts.get(f"agent:{info.name}", 0), "closed": closed.get(info.name)}
        for info in agent_list()
    ]
    # Which versions of each agent this tenant's unfinished tasks run, and which live
    # workers serve each (docs/adr/0037-agent-versions.md).
    versions = version_overview(tenant=principal.tenant)
    return page(request, principal, "console/agents.html", {"agents": agents, "versions": versions}, nav="agents")


@screen
def agent_page(request, principal, name):
    try:
        info = agent_get(name)
    except UnknownAgent as exc:  # the path names nothing: a 404 page, not the 422 of a form
        return refusal(request, principal, exc, status=404)
    who = f"agent:{info.name}"
    decisions = decisions_page(tenant=principal.tenant, principal=who, limit=DECISIONS_SHOWN)
    return page(
        request,
        principal,
        "console/agent.html",
        {
            "agent": info,
            "who": who,
            "grants": grants_of(tenant=principal.tenant, principal=who, live_only=False)[:100],
            "authority": agent_authority(tenant=principal.tenant, agent=info.name),
            "tasks": tasks_under(tenant=principal.tenant, principal=who),
            "decisions": decisions.items,
            "may_change": may_change_grants(principal, who),
            "can_administer": principal.may(ADMINISTER),
            "stewards": agent_stewards(principal, info.name),
            "operators": [m.user.get_username() for m in members_of(principal) if m.role == OPERATOR],
            "switch": agent_switch(tenant=principal.tenant, agent=info.name),
        },
        nav="agents",
    )


@require_POST
@screen
def agent_steward(request, principal, name):
    """Give or take an operator's right over this agent's grants (admins only)."""
    try:
        info = agent_get(name)
    except UnknownAgent as exc:
        return refusal(request, principal, exc, status=404)
    require(principal, ADMINISTER)
    username = param(request, "username", request.POST)
    allow = param(request, "allow", request.POST)
    if not username or allow not in ("yes", "no"):
        raise InvalidArgument("name an operator and say allow=yes or allow=no", field="username")
    changed = agent_steward_set(
        principal=principal,
        name=info.name,
        username=username,
        allowed=allow == "yes",
        reason=param(request, "reason", request.POST) or "",
    )
    verb = "may now" if allow == "yes" else "may no longer"
    messages.success(
        request, f"{username} {verb} change agent:{info.name}'s grants." if changed else "Nothing changed."
    )
    return redirect("ui:agent", info.name)
