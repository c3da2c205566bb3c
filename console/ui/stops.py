"""Stops: the confirmation that asks for a reason and shows what a stop will cover (a
task's tree, or an agent's kill switch), the stop panel (on the task page, and on its
own page /stops/<id>/), and reopening an agent.

The panel fills in live: `#stop-panel` polls its own fragment every 2 s while the tab is
visible, morphing in place (idiomorph keeps what the person reads: scroll, focus, a
selection), and answers 204 when nothing changed since the version the browser shows:
the version is read first, in one statement (stop_live_version), and the summary only
when it moved. Its rows never reorder (tasks in id order, boundaries in a fixed order).
Once the stop is over the fragment comes back without its trigger, with 286, and
polling stops.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from console.access import OPERATE_ACTION, acting, require
from console.ui.web import confirm, page, param, refusal, screen
from runtime import states
from runtime.errors import StopNotFound, UnknownAgent
from runtime.stops.selectors import (
    agent_stop_preview,
    agent_switch,
    stop_live_version,
    stop_preview,
    stop_summary,
    task_latest_stop,
)
from runtime.stops.services import agent_reopen, agent_stop, task_rerun, task_stop
from runtime.tasks.selectors import agent_get, task_get

SHOWN = 50  # tasks on a confirmation page; the rest are counted

# A row's state in the panel's words, and whether it needs a person's eye (the colour).
WORDS = {
    "acknowledged": "acknowledged",
    "waiting": "waiting",
    "missing": "never acknowledged: past its bound",
    "late": "late: after the bound cancelled the task",
}


def panel_context(summary, version: str) -> dict:
    """What the stop panel shows, for the task page and the stop's own page; `version`
    is stop_live_version's, read before the summary (so it is never newer than what the
    panel shows: at worst the next poll reads the panel again)."""
    rows = []
    for one in summary.tasks:
        for row in one.rows:
            past = row.state == "waiting" and one.bound_passed
            rows.append(
                {
                    "task": one.task,
                    "one": one,
                    "row": row,
                    "first": row.boundary == states.STOP_BOUNDARIES[0],
                    "after": (row.at - summary.stop.requested_at) if row.at else None,
                    "words": "waiting: past its bound" if past else WORDS[row.state],
                    "act": past or row.state in ("missing", "late"),
                }
            )
    return {
        "summary": summary,
        "stop": summary.stop,
        "rows": rows,
        "version": version,
        "expected": 4 * summary.task_count,
    }


def task_stop_context(principal, task) -> dict:
    """The task's latest stop for its page, or nothing if it was never stopped."""
    try:
        stop = task_latest_stop(task_id=task.id, tenant=principal.tenant)
    except StopNotFound:
        return {}
    return _panel(principal, stop.id)


def _panel(principal, stop_id, version: str | None = None) -> dict:
    version = version or stop_live_version(stop_id=stop_id, tenant=principal.tenant)
    return panel_context(stop_summary(stop_id=stop_id, tenant=principal.tenant), version)


@screen
def stop_page(request, principal, stop_id):
    return page(request, principal, "console/stop.html", _panel(principal, stop_id), nav="tasks")


@screen
def stop_panel(request, principal, stop_id):
    version = stop_live_version(stop_id=stop_id, tenant=principal.tenant)
    if version == param(request, "seen"):
        return HttpResponse(status=204)
    context = _panel(principal, stop_id, version)
    # 286: htmx stops polling (the stop is over), after swapping in its final state.
    return page(request, principal, "console/stop.html#panel", context, status=286 if context["summary"].over else 200)


@screen
def task_stop_view(request, principal, task_id):
    """GET: what the stop will cover. POST: stop, with the reason, and go to the task's
    page, where its stop panel fills in (web.confirm)."""
    task = task_get(task_id, tenant=principal.tenant)
    require(principal, OPERATE_ACTION)

    def act(reason):
        done = task_stop(task_id=task.id, actor=principal.actor, reason=reason)
        n = len(done.tasks)
        messages.success(
            request,
            f"Stop requested for {n} task{'s' if n != 1 else ''}: "
            f"{len(done.cancelled)} cancelled at once, {len(done.stopping)} waiting for "
            f"their boundaries.",
        )
        return redirect(reverse("ui:task", args=[task.id]) + "#stop-panel")

    return confirm(
        request,
        principal,
        "console/stop_confirm.html",
        {"task": task},
        act=act,
        shows=lambda: {"preview": stop_preview(task_id=task.id, tenant=principal.tenant)},
        nav="tasks",
        why="say why: the reason is kept in the stop and the audit trail",
    )


@screen
def task_rerun_view(request, principal, task_id):
    """A new run of a cancelled root task: GET says what it makes, POST (with a reason)
    makes it and goes to the new task's page."""
    task = task_get(task_id, tenant=principal.tenant)
    require(principal, OPERATE_ACTION)

    def act(reason):
        made = task_rerun(task_id=task.id, actor=principal.actor, reason=reason)
        messages.success(request, f"A new run of {str(task.id)[:13]}: this task, queued.")
        return redirect("ui:task", made)

    return confirm(request, principal, "console/task_rerun.html", {"task": task}, act=act, nav="tasks")


def _agent(request, principal, name):
    try:
        return agent_get(name), None
    except UnknownAgent as exc:  # the path names nothing: a 404 page, not the 422 of a form
        return None, refusal(request, principal, exc, status=404)


@screen
def agent_stop_view(request, principal, name):
    """The kill switch: GET shows the tasks it will stop; POST closes the agent's
    submission in this tenant and stops them, then goes to the stop's page."""
    info, refused = _agent(request, principal, name)
    if refused:
        return refused
    require(principal, OPERATE_ACTION)

    def act(reason):
        done = agent_stop(tenant=principal.tenant, agent=info.name, actor=principal.actor, reason=reason)
        messages.success(
            request,
            f"{info.name} is stopped in {principal.tenant}: submission closed, "
            f"{len(done.tasks)} task{'s' if len(done.tasks) != 1 else ''} stopped.",
        )
        return redirect("ui:stop", done.stop_id)

    return confirm(
        request,
        principal,
        "console/agent_stop.html",
        {"agent": info, "switch": agent_switch(tenant=principal.tenant, agent=info.name)},
        act=act,
        shows=lambda: {"preview": agent_stop_preview(tenant=principal.tenant, agent=info.name)},
        nav="agents",
        why="say why: the reason is kept in the stop and the audit trail",
    )


@screen
def agent_reopen_view(request, principal, name):
    """POST only (the form is on the agent's page): open its submission again."""
    info, refused = _agent(request, principal, name)
    if refused:
        return refused
    require(principal, OPERATE_ACTION)
    if request.method != "POST":
        return redirect(reverse("ui:agent", args=[info.name]) + "#agent-switch")
    reason = (request.POST.get("reason") or "").strip()
    with acting(principal):
        changed = agent_reopen(tenant=principal.tenant, agent=info.name, actor=principal.actor, reason=reason)
    messages.success(
        request,
        f"{info.name} is open again in {principal.tenant}."
        if changed
        else f"{info.name} was open already: nothing changed.",
    )
    return redirect(reverse("ui:agent", args=[info.name]) + "#agent-switch")


__all__ = [
    "stop_page",
    "stop_panel",
    "task_stop_view",
    "task_rerun_view",
    "agent_stop_view",
    "agent_reopen_view",
    "panel_context",
    "task_stop_context",
]
