"""What every console view shares: who is asking (console/access/), how a refusal is
shown, and rendering a screen with its header. No decisions about access live here:
they are the access package's; this only turns its answers into pages.

`@screen` is the first step of every view's recipe: it asks `session_principal` who
this is (not signed in: a redirect to the login page, or 401 for an htmx fragment, whose
swap must not paint a login form into a table cell) and turns a refusal raised anywhere
in the view into its page: not found (another tenant's object too) is 404, a
forbidden action 403, other bad input 400.
"""

from __future__ import annotations

import functools
from datetime import datetime
from types import SimpleNamespace
from urllib.parse import urlencode

from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.timezone import is_naive, make_aware

from console.access import OPERATE_ACTION, acting, session_principal, tenants_of
from runtime import states
from runtime.effects.selectors import effect_page
from runtime.errors import InvalidEncoding, InvalidInput, StewardError, Unauthenticated

__all__ = [
    "screen",
    "page",
    "refusal",
    "form_status",
    "param",
    "typed_from",
    "when",
    "kept",
    "listing",
    "NO_ROWS",
    "OPERATE_ACTION",
]


def screen(view):
    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            principal = session_principal(request)
        except Unauthenticated as exc:
            if request.htmx:
                # 401 (nothing is swapped), and htmx sends the whole page to sign in, back here after.
                response = HttpResponse("Sign in again to go on.", status=401, content_type="text/plain")
                back = request.htmx.current_url_abs_path or "/"
                response["HX-Redirect"] = reverse("ui:login") + "?" + urlencode({"next": back})
                return response
            if request.user.is_authenticated:  # signed in, but a member of no tenant
                return render(request, "console/error.html", {"status": 401, "message": exc.message}, status=401)
            return redirect_to_login(request.get_full_path())
        if request.method == "POST":
            try:
                _sent_as_utf8(request.POST.lists())
            except InvalidEncoding as exc:  # what was typed is refused: the form's own 4xx
                return refusal(request, principal, exc, status=form_status(exc))
        try:
            return view(request, principal, *args, **kwargs)
        except StewardError as exc:
            return refusal(request, principal, exc)

    return wrapper


def _sent_as_utf8(items) -> None:
    """A U+FFFD means the browser's bytes were not UTF-8 (Django decodes them with
    replacement): refused before any form sees them, never stored as typed."""
    for key, values in items:
        if any("\ufffd" in value for value in values):
            raise InvalidEncoding(f"{key} was not sent as UTF-8", field=key)


def form_status(exc: StewardError) -> int:
    """What a form shown again with its refusal answers: the error's own 4xx, else 400
    (a refusal of what was typed is never a 5xx)."""
    return exc.status if 400 <= exc.status < 500 else 400


def refusal_status(exc: StewardError) -> int:
    """What a refusal answers: its own status where a person must know it (not signed
    in, forbidden, not found, a conflict, too large, too many), else 400."""
    return exc.status if exc.status in (401, 403, 404, 409, 413, 429) else 400


def refusal(request, principal, exc: StewardError, *, status: int | None = None):
    status = status or refusal_status(exc)
    if request.htmx:
        return HttpResponse(f"{exc.code}: {exc.message}", status=status, content_type="text/plain")
    titles = {403: "Not allowed", 404: "Not found"}
    return page(
        request,
        principal,
        "console/error.html",
        {
            "status": status,
            "title": titles.get(status, "Refused"),
            "code": exc.code,
            "message": "Nothing here, or nothing you may see." if status == 404 else exc.message,
        },
        status=status,
    )


def page(request, principal, template: str, context: dict | None = None, *, status: int = 200, nav: str = ""):
    """Render a screen (or, with `#partial` in the name, one partial of it) with what the
    header needs: the person, their role and tenants, and whether to draw action buttons."""
    context = {
        # Full pages only: the header's count of effects waiting for a person.
        "waiting": _waiting(principal) if "#" not in template else 0,
        "principal": principal,
        "memberships": tenants_of(principal.user),
        "can_operate": principal.may(OPERATE_ACTION),
        "nav": nav,
        **(context or {}),
    }
    return render(request, template, context, status=status)


def confirm(
    request,
    principal,
    template: str,
    context: dict,
    *,
    act,
    shows=dict,
    nav: str = "",
    why: str = "say why: the reason is kept in the audit trail",
):
    """A consequential action's page. GET: what it will affect (`shows()`, read afresh
    for each answer). POST: do it with the reason typed (required), as the person
    (`act(reason)` returns the answer, usually a redirect); on a refusal, the same page
    again with the message and the reason kept, status 4xx."""
    context = {**context, "reason": "", "error": None}
    status = 200
    if request.method == "POST":
        context["reason"] = reason = (request.POST.get("reason") or "").strip()
        try:
            if not reason:
                raise InvalidInput(why, field="reason")
            with acting(principal):
                return act(reason)
        except StewardError as exc:
            context["error"], status = exc, form_status(exc)
    return page(request, principal, template, {**context, **shows()}, status=status, nav=nav)


def param(request, name: str, source=None) -> str | None:
    """A filter from the query string, stripped; empty means not given. A control
    character (a NUL above all, which PostgreSQL refuses in text) is refused here, for
    every filter at once, rather than left to reach a query as a 500."""
    value = (source if source is not None else request.GET).get(name, "")
    value = value.strip()
    if value and not value.isprintable():
        raise InvalidInput(f"{name} holds a control character", field=name)
    return value or None


def when(value: str | None, field: str) -> datetime | None:
    """A time typed into a filter: an ISO date or date-time, UTC unless it says otherwise."""
    if value is None:
        return None
    text = value.replace(" ", "T")
    try:
        parsed = parse_datetime(text if "T" in text else f"{text}T00:00:00")
    except ValueError:  # well formed but not a time: month 13, year 0
        parsed = None
    if parsed is None:
        raise InvalidInput(f"{field} must be a date or a date-time like 2026-12-01T09:30", field=field)
    return make_aware(parsed) if is_naive(parsed) else parsed


def kept(request, names) -> dict:
    """The filters as typed, to show again in the form whatever is wrong with them:
    stripped, control characters left out (never refused here; `param` refuses them)."""
    return {name: "".join(c for c in request.GET.get(name, "").strip() if c.isprintable()) for name in names}


NO_ROWS = SimpleNamespace(items=[], next=None)  # what a refused filter lists: nothing


def listing(request, principal, template: str, context: dict, read, *, nav: str = ""):
    """A list page filtered from the URL. `context` is what the form needs whatever
    happens (its choices, the filters as typed: `kept`); `read()` validates the filters,
    reads the rows and returns the rest. A filter it refuses (malformed, huge, out of
    range, another tenant's object) is shown inline on the same page, above no rows, with
    every filter kept as typed and a link that drops only the refused one, answered with
    the status a refusal page would have had (400, or 404 for another tenant's task):
    never a dead-end refusal page."""
    try:
        found, status = read(), 200
    except StewardError as exc:
        if not 400 <= exc.status < 500:
            raise
        field = exc.details.get("field")
        rest = {k: v for k, v in request.GET.items() if k not in (field, "cursor") and field and v}
        if field and rest.get("q"):  # a qualifier in the search box is the same filter
            rest["q"] = " ".join(w for w in rest["q"].split() if not w.startswith(f"{field}:"))
        found = {
            "filter_error": exc,
            "filter_field": field,
            "filter_clear_url": request.path + ("?" + urlencode(rest) if rest else ""),
        }
        status = refusal_status(exc)
    return page(request, principal, template, {"filter_error": None, **context, **found}, status=status, nav=nav)


def typed_from(source, names) -> dict:
    """What a form or filter carries, stripped; refused if not sent as UTF-8 (a query
    string is not checked by screen(), a form is checked twice)."""
    typed = {k: (source.get(k) or "").strip() for k in names}
    _sent_as_utf8((key, [value]) for key, value in typed.items())
    return typed


WAITING_COUNTED = 99


def _waiting(principal) -> int:
    """Unknown effects of the tenant (off effect_tenant_state_id; counted up to 99)."""
    return len(effect_page(tenant=principal.tenant, state=states.UNKNOWN, limit=WAITING_COUNTED).items)
