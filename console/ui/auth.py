"""Signing in and out, and switching tenant (the header's switcher)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from console.access import switch_tenant
from console.signin import SignInForm
from console.ui.web import screen


class LoginView(auth_views.LoginView):
    """Sign-in, throttled per account and per address (console/signin.py): a locked-out
    attempt gets this page saying so, as a 429."""

    template_name = "console/login.html"
    form_class = SignInForm
    redirect_authenticated_user = True


logout = auth_views.LogoutView.as_view()  # POST only (Django 5)
login = LoginView.as_view()


@require_POST
@screen
def tenant(request, principal):
    """Switch to another of the person's tenants; one they do not belong to is 404."""
    switch_tenant(request, (request.POST.get("tenant") or "").strip())
    back = request.POST.get("next") or "/"
    # The same path may name another tenant's object now: go to the screen's list instead.
    back = back if url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}) else "/"
    return redirect(_screen_of(back))


def _screen_of(path: str) -> str:
    """/tasks/<id>/steps/3/ -> /tasks/: after a switch, an object URL would be 404."""
    first = path.strip("/").split("/", 1)[0]
    return f"/{first}/" if first in {"tasks", "effects", "pools", "audit", "tokens", "members"} else "/"
