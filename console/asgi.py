"""The ASGI application: `uvicorn console.asgi:application` (docs/deploy.md).

/gateway/ goes to the gateway's own handler (console/gateway/handler.py: its short
middleware chain, no thread per request); everything else (the console, the API, the
admin, /metrics, webhooks) to Django's ASGIHandler, which runs the sync views in
threads as Django does. In debug, static files are served too, as runserver does.

The lifespan protocol: at shutdown, the gateway's provider connections are closed and
its database threads finish the statements queued (a call's finish).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django_application = get_asgi_application()

from django.conf import settings  # noqa: E402 - after Django is set up

from console.gateway.handler import GatewayHandler  # noqa: E402

if settings.DEBUG:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_application = ASGIStaticFilesHandler(django_application)

gateway_application = GatewayHandler()
GATEWAY_PREFIX = "/gateway/"


async def application(scope, receive, send):
    kind = scope["type"]
    if kind == "http" and scope["path"].startswith(GATEWAY_PREFIX):
        await gateway_application(scope, receive, send)
    elif kind == "lifespan":
        await _lifespan(receive, send)
    else:
        await django_application(scope, receive, send)


async def _lifespan(receive, send) -> None:
    from console.gateway import upstream
    from console.gateway.database import statements

    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await upstream.close_sessions()
            statements.stop()
            await send({"type": "lifespan.shutdown.complete"})
            return
