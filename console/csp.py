"""The Content-Security-Policy header, from settings.SECURE_CSP, on every response.

Django 5.2 has no CSP of its own (Django 6 adds one that reads the same setting), and the
policy here is one fixed header with no nonces: the console carries no inline script or
style at all, so a middleware of a few lines does what django-csp would, without a
dependency whose settings format changed wholesale in its 4.0
(docs/adr/0024-deployment-hardening.md).

A view that needs a different policy sets its own header; this leaves it alone.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings

HEADER = "Content-Security-Policy"


def policy(directives: dict[str, list[str]]) -> str:
    """`default-src 'self'; img-src 'self' data:` from {"default-src": ["'self'"], ...}."""
    return "; ".join(" ".join([name, *sources]) for name, sources in directives.items())


class ContentSecurityPolicyMiddleware:
    """Sync and async alike: under an ASGI server it adds no hop to a thread
    (console/gateway/handler.py)."""

    sync_capable = async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        return _with_policy(self.get_response(request))

    async def _acall(self, request):
        return _with_policy(await self.get_response(request))


def _with_policy(response):
    # Read per response, not once: a test (or a settings override) changes it.
    directives = getattr(settings, "SECURE_CSP", None)
    if directives and HEADER not in response:
        response[HEADER] = policy(directives)
    return response
