"""The ASGI handler of the gateway's routes (console/asgi.py sends /gateway/ here).

Django's own ASGIHandler would do for correctness; two things it does per request cost
a stream more than the stream itself (docs/adr/0031-asgi-gateway.md):

* **The middleware.** The project's MIDDLEWARE (sessions, CSRF, authentication,
  messages, htmx, the sign-in throttle) does nothing for a machine's call that carries
  a capability token, and each sync middleware is one hop to a thread and back per
  request. The gateway's chain is settings.GATEWAY_MIDDLEWARE: the security headers and
  the Content-Security-Policy every answer carries.
* **A thread per request.** Django opens a ThreadSensitiveContext per request, and its
  first sync call (the request_started signal's receivers) starts a thread that lives as
  long as the request: a thousand streams would be a thousand idle threads. Here the few
  sync calls of a gateway request (those receivers, the security middleware, the
  response's close) share asgiref's one thread for code that must run in a single
  thread; none of them touches the database. The database work has threads of its own
  (console/gateway/database.py).
"""

from __future__ import annotations

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler


class GatewayHandler(ASGIHandler):
    def load_middleware(self, is_async=False):
        # BaseHandler.load_middleware reads settings.MIDDLEWARE: point it at the
        # gateway's list while this handler is built (once, at start-up, before any
        # request), then put the project's back.
        project = settings.MIDDLEWARE
        settings.MIDDLEWARE = settings.GATEWAY_MIDDLEWARE
        try:
            super().load_middleware(is_async=is_async)
        finally:
            settings.MIDDLEWARE = project

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"the gateway serves HTTP, not {scope['type']}")
        await self.handle(scope, receive, send)  # no ThreadSensitiveContext: see above
