"""Budgets: the tenant's model-token budgets with what was counted against them, its
service quotas, and an operator's change of the budgets, refused with its reason on the
form. The same services as the API and the CLI (runtime.limits)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect

from console.access import OPERATE_ACTION, acting, require
from console.ui.web import form_status, page, screen
from runtime.errors import ArgumentOutOfRange, StewardError
from runtime.limits.selectors import budget_use
from runtime.limits.services import budget_set

FIELDS = ("task_tokens", "tree_tokens", "tenant_tokens")


@screen
def budget_page(request, principal):
    return page(request, principal, "console/budgets.html", _context(principal), nav="budgets")


@screen
def budget_set_view(request, principal):
    if request.method != "POST":
        return redirect("ui:budgets")
    require(principal, OPERATE_ACTION)
    typed = {k: (request.POST.get(k) or "").strip() for k in (*FIELDS, "version", "reason")}
    try:
        limits = {field: _count(field, typed[field]) for field in FIELDS}
        version = _count("version", typed["version"]) if typed["version"] else None
        with acting(principal):
            b = budget_set(
                tenant=principal.tenant, actor=principal.actor, version=version, reason=typed["reason"], **limits
            )
        messages.success(request, f"Budgets of {principal.tenant} saved (version {b.version}).")
        return redirect("ui:budgets")
    except StewardError as exc:
        return page(
            request,
            principal,
            "console/budgets.html",
            {**_context(principal), "typed": typed, "error": exc},
            status=form_status(exc),
            nav="budgets",
        )


def _count(field: str, text: str) -> int | None:
    """An empty box is no budget; anything else a whole number (its bounds: the service's)."""
    if not text:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 20:
        raise ArgumentOutOfRange(
            f"{field} must be a whole number of tokens, or empty for none, got {text[:20]!r}", field=field
        )
    return int(text)


def _context(principal) -> dict:
    use = budget_use(principal.tenant)
    return {
        "use": use,
        "rows": [use.tenant_use, *use.trees, *use.tasks],
        "budget": use.budget,
        "typed": None,
        "error": None,
    }
