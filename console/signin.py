"""Sign-in throttling: django-axes counts failed sign-ins per account (the username tried,
whether or not it exists) and per client address, and past STEWARD_SIGNIN_FAILURE_LIMIT
refuses that account, or that address, for STEWARD_SIGNIN_COOLOFF_SECONDS (console/settings.py,
docs/adr/0026-admin-scope-and-sign-in-throttling.md). This module is what Steward adds:

* `client_address`: where a request comes from, the peer or a header the operator trusts;
* `SignInForm`, `AdminSignInForm`: the console's and the admin's sign-in forms, which say
  "locked" instead of "wrong password" when the throttle refused the attempt;
* `SignInThrottleMiddleware`: django-axes' middleware, with the page kept under ASGI;
* `locked_out`: the answer to a locked-out sign-in (that page, as a 429 with Retry-After),
  and the lockout's audit event, one per lockout, in the system tenant's trail.

Everything goes through django.contrib.auth.authenticate(), which only the two sign-in
forms call: API bearer tokens (console/access/tokens.py token_principal) never do, so a lockout
leaves a person's tokens, and the sessions they already have, working.
"""

from __future__ import annotations

import ipaddress

from asgiref.sync import sync_to_async
from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_username, get_lockout_response
from axes.middleware import AxesMiddleware
from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpResponse

from runtime.limits.services import SYSTEM_TENANT
from runtime.trail.services import AuditKind, audit_record_once

LOCKED_OUT = AuditKind.SIGNIN_LOCKED_OUT  # the audit kind of a lockout
USERNAME_SHOWN = 150  # auth_user.username; a longer name never reaches authenticate()


def client_address(request) -> str | None:
    """The client's address (AXES_CLIENT_IP_CALLABLE): with STEWARD_CLIENT_IP_HEADER set,
    the entry STEWARD_CLIENT_IP_PROXIES places from the right of that header (what the
    operator's own proxies wrote); without it, or when the header is missing or that entry
    is no address, the connection's peer. A client that forges the header cannot choose
    its address: the entries it sent are to the left of those the proxies appended, and a
    garbled one counts against the proxy's own address, never a fresh one."""
    header, proxies = settings.STEWARD_CLIENT_IP_HEADER, settings.STEWARD_CLIENT_IP_PROXIES
    if header:
        entries = [part.strip() for part in request.META.get(header, "").split(",")]
        if len(entries) >= proxies and (address := _address(entries[-proxies])):
            return address
    return _address(request.META.get("REMOTE_ADDR", ""))


def _address(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:  # "" behind a unix socket, "unknown", a port or a forgery
        return None


def lockout_message() -> str:
    return (
        "Too many failed sign-ins for this account or from this address: signing in is locked for "
        f"{_duration(settings.AXES_COOLOFF_TIME.total_seconds())}. Wait, then try again; an administrator "
        "can unlock it sooner."
    )


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    if seconds >= 120:
        return f"{round(seconds / 60)} minutes"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


class _Throttled:
    """authenticate() answers None both for a wrong password and for an attempt the
    throttle refused (or the one that just locked the account): only the request knows
    which (axes marks it), and a person must be told which."""

    def clean(self):
        try:
            return super().clean()
        except forms.ValidationError:
            if getattr(self.request, "axes_locked_out", False):
                raise forms.ValidationError(lockout_message(), code="locked_out") from None
            raise


class SignInForm(_Throttled, AuthenticationForm):
    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "That username and password do not match. Try again.",
    }


class AdminSignInForm(_Throttled, AdminAuthenticationForm):
    pass


class SignInThrottleMiddleware(AxesMiddleware):
    """AxesMiddleware, whose async path (django-axes 8.3.1, the one uvicorn takes) hands
    the lockout callable the credentials where its sync path hands the page the form
    rendered: `locked_out` would then answer a bare text instead of the sign-in page that
    says why. Here both paths pass the page."""

    async def __acall__(self, request):
        response = await self.get_response(request)
        if settings.AXES_ENABLED and getattr(request, "axes_locked_out", None):
            credentials = getattr(request, "axes_credentials", None)
            response = await sync_to_async(get_lockout_response, thread_sensitive=True)(request, response, credentials)
        return response


def locked_out(request, response=None, credentials=None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: axes calls it for every sign-in refused or stopped by a lock.

    1. If this attempt's failure was counted (axes counts none while a lock holds), it may
       be the one that set a lock: record the lockout of each thing now over the limit,
       the account and the address, each once (audit_record_once; requests racing to the
       limit write one event between them).
    2. Answer with the sign-in page the form rendered, which says why (SignInForm), as 429
       Too Many Requests with Retry-After: the cool-off, the longest the lock can last.
    """
    if getattr(request, "axes_failures_since_start", None) is not None:
        _record(request, credentials)
    if response is None or response.status_code != 200 or "html" not in response.get("Content-Type", ""):
        response = HttpResponse(lockout_message(), content_type="text/plain; charset=utf-8")
    response.status_code = settings.AXES_HTTP_RESPONSE_CODE
    response["Retry-After"] = str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    return response


def _record(request, credentials) -> None:
    """One `signin.locked_out` event per lockout, in the system tenant's trail: a sign-in
    is the deployment's, not a tenant's (a person signs in once for all their tenants, and
    an address or a name nobody has belongs to none), so superusers read it there."""
    username = get_client_username(request, credentials)
    address = request.axes_ip_address
    limit, cool_off = settings.AXES_FAILURE_LIMIT, settings.AXES_COOLOFF_TIME
    # The handler's own count, per lockout parameter ("username", "ip_address"), in order.
    counted = AxesProxyHandler.get_implementation().get_user_attempts(request, credentials)
    for parameter, attempts in zip(settings.AXES_LOCKOUT_PARAMETERS, counted, strict=True):
        failures = sum(attempts.values_list("failures_since_start", flat=True))
        if failures < limit:
            continue
        subject = "account" if parameter == "username" else "address"
        value = (username or "")[:USERNAME_SHOWN] if subject == "account" else (address or "unknown")
        audit_record_once(
            actor=f"client:{address or 'unknown'}",
            tenant=SYSTEM_TENANT,
            kind=LOCKED_OUT,
            about=f"{subject}:{value}",
            within=cool_off,
            data={
                "locked": subject,
                "person": (username or "")[:USERNAME_SHOWN],
                "address": address,
                "failures": failures,
                "limit": limit,
                "cool_off_seconds": int(cool_off.total_seconds()),
                "path": request.path[:200],
            },
        )
