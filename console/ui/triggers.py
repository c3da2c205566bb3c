"""Schedules and webhooks: lists (filters in the URL), a form to make one, a page each
(a schedule's next runs and recent tasks; a webhook's recent deliveries), pause and
resume. Every action calls the runtime service the API and the CLI call."""

from __future__ import annotations

import json

from django.contrib import messages
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from console.access import OPERATE_ACTION, acting, require
from console.ui.web import form_status, page, param, screen
from runtime.errors import StewardError
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


def _paused_filter(request):
    state = param(request, "state")
    return state, {"paused": True, "active": False}.get(state)


def _schedules(request, principal, **extra) -> dict:
    state, paused = _paused_filter(request)
    agent = param(request, "agent")
    rows = [(s, schedule_upcoming(s, 1)) for s in schedule_list(tenant=principal.tenant, paused=paused, agent=agent)]
    return {
        "schedules": rows,
        "state": state,
        "agent": agent,
        "missed": MISSED,
        "overlap": OVERLAP,
        "typed": {"timezone": "UTC", "input": "{}"},
        "error": None,
        **extra,
    }


@screen
def schedule_list_view(request, principal):
    return page(request, principal, "console/schedules.html", _schedules(request, principal), nav="schedules")


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
        return page(
            request,
            principal,
            "console/schedules.html",
            _schedules(request, principal, typed=typed, error=exc),
            status=form_status(exc),
            nav="schedules",
        )
    messages.success(request, f"Schedule {made.name} made; it first runs at {made.next_fire_at:%Y-%m-%d %H:%M} UTC.")
    return redirect(f"/schedules/{made.id}/")


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
        f"/schedules/{found.id}/",
        "Schedule",
    )


@screen
def schedule_pause_view(request, principal, schedule_id):
    return _schedule_toggle(request, principal, schedule_id, schedule_pause, "paused")


@screen
def schedule_resume_view(request, principal, schedule_id):
    return _schedule_toggle(request, principal, schedule_id, schedule_resume, "resumed")


def _webhooks(request, principal, **extra) -> dict:
    state, paused = _paused_filter(request)
    return {
        "webhooks": webhook_list(tenant=principal.tenant, paused=paused),
        "state": state,
        "typed": {},
        "error": None,
        "made": None,
        **extra,
    }


@screen
def webhook_list_view(request, principal):
    return page(request, principal, "console/webhooks.html", _webhooks(request, principal), nav="webhooks")


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
        return page(
            request,
            principal,
            "console/webhooks.html",
            _webhooks(request, principal, typed=typed, error=exc),
            status=form_status(exc),
            nav="webhooks",
        )
    # The secret exists only in this response: no redirect, nothing kept to show it again.
    response = page(
        request,
        principal,
        "console/webhooks.html",
        _webhooks(request, principal, made={"webhook": made, "secret": secret}),
        status=201,
        nav="webhooks",
    )
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
            "url": request.build_absolute_uri(f"/hooks/{hook.id}"),
        },
        nav="webhooks",
    )


def _webhook_toggle(request, principal, webhook_id, fn, done: str):
    found = webhook_get(webhook_id, tenant=principal.tenant)
    return _toggle(
        request, principal, found, lambda **kw: fn(webhook_id=found.id, **kw), done, f"/webhooks/{found.id}/", "Webhook"
    )


@screen
def webhook_pause_view(request, principal, webhook_id):
    return _webhook_toggle(request, principal, webhook_id, webhook_pause, "paused")


@screen
def webhook_resume_view(request, principal, webhook_id):
    return _webhook_toggle(request, principal, webhook_id, webhook_resume, "resumed")


@screen
def dependency_list_view(request, principal):
    state = param(request, "state")
    if state not in (None, *DEPENDENCY_STATES):
        state = None
    return page(
        request,
        principal,
        "console/dependencies.html",
        {
            "triggers": dependency_list(tenant=principal.tenant, state=state),
            "state": state,
            "states": DEPENDENCY_STATES,
        },
        nav="dependencies",
    )
