"""Pools: occupancy and limits (fleet-wide: every tenant's tasks share a pool), and an
operator's change of limits, refused with its reason on the form."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from console.access import OPERATE_ACTION, acting, require
from console.ui.web import form_status, page, refusal, screen
from runtime.errors import ArgumentOutOfRange, StewardError, UnknownPool
from runtime.limits.selectors import pool_usage
from runtime.limits.services import pool_set_limits
from runtime.tasks.selectors import task_page


@screen
def pool_list(request, principal):
    return page(request, principal, "console/pools.html", {"pools": pool_usage().items}, nav="pools")


def _usage(name: str):
    return next((u for u in pool_usage().items if u.pool.name == name), None)


@screen
def pool_detail(request, principal, name):
    usage = _usage(name)
    if usage is None:
        return refusal(request, principal, UnknownPool(f"no pool {name!r}"), status=404)
    return page(request, principal, "console/pool.html", _context(principal, usage), nav="pools")


@screen
def pool_limits(request, principal, name):
    usage = _usage(name)
    if usage is None:
        return refusal(request, principal, UnknownPool(f"no pool {name!r}"), status=404)
    if request.method != "POST":
        return redirect("ui:pool", name)
    require(principal, OPERATE_ACTION)
    typed = {k: (request.POST.get(k) or "").strip() for k in ("max_running", "max_queued")}
    try:
        limits = {}
        for field, text in typed.items():
            if text:
                if not text.isdigit():
                    raise ArgumentOutOfRange(f"{field} must be a whole number, got {text[:20]!r}", field=field)
                limits[field] = int(text)
        with acting(principal):
            pool = pool_set_limits(name=name, actor=principal.actor, **limits)
        messages.success(request, f"Limits of {name}: {pool.max_running} running, {pool.max_queued} queued.")
        return redirect("ui:pool", name)
    except StewardError as exc:
        return page(
            request,
            principal,
            "console/pool.html",
            {**_context(principal, usage), "typed": typed, "error": exc},
            status=form_status(exc),
            nav="pools",
        )


def _context(principal, usage) -> dict:
    tasks = task_page(tenant=principal.tenant, pool=usage.pool.name, limit=20)
    return {"usage": usage, "pool": usage.pool, "tasks": tasks, "typed": None, "error": None}
