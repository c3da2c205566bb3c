"""Schedules and webhooks: lists (filters in the URL), a form to make one, a page each
(a schedule's next runs and recent tasks; a webhook's recent deliveries), pause and
resume. Every action calls the runtime service the API and the CLI call."""

from __future__ import annotations

import json

from django.contrib import messages
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from console.access import OPERATE_ACTION, acting, require
from console.ui.web import form_status, kept, listing, page, param, screen
from runtime.errors import InvalidInput, StewardError
from runtime.tasks.selectors import agent_list
from runtime.tasks.services import input_parse
from runtime.triggers.selectors import (
    DEPENDENCY_STATES,
    dependency_list,
    schedule_get,
    schedule_list,
    schedule_upcoming,
    webhook_deliveries,
    webhook_get,
    webhook_list,
)
from runtime.triggers.services import (
    schedule_create,
    schedule_pause,
    schedule_resume,
    webhook_create,
    webhook_pause,
    webhook_resume,
)

MISSED = ("skip", "catch_up")
OVERLAP = ("skip", "queue", "stop")
SCHEDULE_FIELDS = ("name", "agent", "input", "cron", "timezone", "missed_policy", "overlap_policy", "pool")


PAUSED = {"active": False, "paused": True}


def _paused_filter(request) -> bool | None:
    state = param(request, "state")
    if state is not None and state not in PAUSED:
        raise InvalidInput("state must be active or paused (or empty: any)", field="state")
    return PAUSED.get(state)


def _trigger_list(request, principal, template: str, nav: str, rows, extra: dict):
    """A trigger list: its filters (state, agent) from the URL, refused inline
    (web.listing); `rows(paused, agent)` reads the rows; `extra` is the make form's."""
    typed = kept(request, ("state", "agent"))
    form = {"state": typed["state"], "agent": typed["agent"], "agents": [a.name for a in agent_list()], **extra}

    def read() -> dict:
        paused = _paused_filter(request)
        return {
            "state": param(request, "state"),
            "agent": param(request, "agent"),
            **rows(paused, param(request, "agent")),
        }

    return listing(request, principal, template, form, read, nav=nav)


def _schedules(request, principal, *, status: int = 200, **extra):
    def rows(paused, agent) -> dict:
        found = schedule_list(tenant=principal.tenant, paused=paused, agent=agent)
        return {"schedules": [(s, schedule_upcoming(s, 1)) for s in found]}

    response = _trigger_list(
        request,
        principal,
        "console/schedules.html",
        "schedules",
        rows,
        {
            "schedules": [],
            "missed": MISSED,
            "overlap": OVERLAP,
            "typed": {"timezone": "UTC", "input": "{}"},
            "error": None,
            **extra,
        },
    )
    if response.status_code == 200:
        response.status_code = status
    return response


@screen
def schedule_list_view(request, principal):
    return _schedules(request, principal)


@require_POST
@screen
def schedule_new(request, principal):
    require(principal, OPERATE_ACTION)
    typed = {k: (request.POST.get(k) or "").strip() for k in SCHEDULE_FIELDS}
    try:
        with acting(principal):
            made = schedule_create(
                tenant=principal.tenant,
                owner=principal.actor,
                actor=principal.actor,
                name=typed["name"],
                agent=typed["agent"],
                input=input_parse(typed["input"] or "{}"),
                cron=typed["cron"],
                timezone=typed["timezone"] or "UTC",
                missed_policy=typed["missed_policy"] or "skip",
                overlap_policy=typed["overlap_policy"] or "skip",
                pool=typed["pool"] or None,
            )
    except StewardError as exc:
        return _schedules(request, principal, typed=typed, error=exc, status=form_status(exc))
    messages.success(request, f"Schedule {made.name} made; it first runs at {made.next_fire_at:%Y-%m-%d %H:%M} UTC.")
    return redirect("ui:schedule", made.id)


@screen
def schedule_page(request, principal, schedule_id):
    schedule = schedule_get(schedule_id, tenant=principal.tenant)
    return page(
        request,
        principal,
        "console/schedule.html",
        {
            "schedule": schedule,
            "upcoming": schedule_upcoming(schedule, 10),
            "input_json": json.dumps(schedule.input, indent=2, sort_keys=True),
        },
        nav="schedules",
    )


def _toggle(request, principal, found, change, done: str, url: str, what: str):
    """Pause or resume (the recipe both screens share): POST only, operators only, the
    object already found in the principal's tenant (another tenant's is 404)."""
    require(principal, OPERATE_ACTION)
    if request.method != "POST":
        return redirect(url)
    with acting(principal):
        changed = change(actor=principal.actor, tenant=principal.tenant)
    messages.success(request, f"{what} {found.name} {done}." if changed else f"{found.name} was already {done}.")
    return redirect(url)


def _schedule_toggle(request, principal, schedule_id, fn, done: str):
    found = schedule_get(schedule_id, tenant=principal.tenant)
    return _toggle(
        request,
        principal,
        found,
        lambda **kw: fn(schedule_id=found.id, **kw),
        done,
        reverse("ui:schedule", args=[found.id]),
        "Schedule",
    )


@screen
def schedule_pause_view(request, principal, schedule_id):
    return _schedule_toggle(request, principal, schedule_id, schedule_pause, "paused")


@screen
def schedule_resume_view(request, principal, schedule_id):
    return _schedule_toggle(request, principal, schedule_id, schedule_resume, "resumed")


def _webhooks(request, principal, *, status: int = 200, **extra):
    response = _trigger_list(
        request,
        principal,
        "console/webhooks.html",
        "webhooks",
        lambda paused, agent: {"webhooks": webhook_list(tenant=principal.tenant, paused=paused, agent=agent)},
        {"webhooks": [], "typed": {}, "error": None, "made": None, **extra},
    )
    if response.status_code == 200:
        response.status_code = status
    return response


@screen
def webhook_list_view(request, principal):
    return _webhooks(request, principal)


@require_POST
@screen
def webhook_new(request, principal):
    require(principal, OPERATE_ACTION)
    typed = {k: (request.POST.get(k) or "").strip() for k in ("name", "agent", "pool")}
    try:
        with acting(principal):
            made, secret = webhook_create(
                tenant=principal.tenant,
                owner=principal.actor,
                actor=principal.actor,
                name=typed["name"],
                agent=typed["agent"],
                pool=typed["pool"] or None,
            )
    except StewardError as exc:
        return _webhooks(request, principal, typed=typed, error=exc, status=form_status(exc))
    # The secret exists only in this response: no redirect, nothing kept to show it again.
    response = _webhooks(request, principal, made={"webhook": made, "secret": secret}, status=201)
    response["Cache-Control"] = "no-store"
    return response


@screen
def webhook_page(request, principal, webhook_id):
    hook = webhook_get(webhook_id, tenant=principal.tenant)
    return page(
        request,
        principal,
        "console/webhook.html",
        {
            "webhook": hook,
            "deliveries": webhook_deliveries(hook, 50),
            "url": request.build_absolute_uri(reverse("hook-deliver", args=[hook.id])),
        },
        nav="webhooks",
    )


def _webhook_toggle(request, principal, webhook_id, fn, done: str):
    found = webhook_get(webhook_id, tenant=principal.tenant)
    return _toggle(
        request,
        principal,
        found,
        lambda **kw: fn(webhook_id=found.id, **kw),
        done,
        reverse("ui:webhook", args=[found.id]),
        "Webhook",
    )


@screen
def webhook_pause_view(request, principal, webhook_id):
    return _webhook_toggle(request, principal, webhook_id, webhook_pause, "paused")


@screen
def webhook_resume_view(request, principal, webhook_id):
    return _webhook_toggle(request, principal, webhook_id, webhook_resume, "resumed")


@screen
def dependency_list_view(request, principal):
    form = {"triggers": [], "state": kept(request, ("state",))["state"], "states": DEPENDENCY_STATES}

    def read() -> dict:
        state = param(request, "state")
        if state not in (None, *DEPENDENCY_STATES):
            raise InvalidInput(f"state must be one of {', '.join(DEPENDENCY_STATES)} (or empty: any)", field="state")
        return {"triggers": dependency_list(tenant=principal.tenant, state=state), "state": state}

    return listing(request, principal, "console/dependencies.html", form, read, nav="dependencies")
