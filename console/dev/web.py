"""How the web tier is started here: by `make run` (console/dev/run.py), the tests'
web server (tests/e2e/stack.py) and the benches, the way docs/deploy.md serves it."""

from __future__ import annotations

import sys

PYTHON = sys.executable


def web_command(port: int, *, host: str = "127.0.0.1", workers: int = 1) -> list[str]:
    """The web tier as docs/deploy.md serves it: uvicorn over console.asgi (the console,
    the API and the credential gateway, whose streams are coroutines on its event loop:
    docs/adr/0031-asgi-gateway.md), with uvloop and httptools, no access log."""
    return [
        PYTHON,
        "-m",
        "uvicorn",
        "console.asgi:application",
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--lifespan",
        "on",
        "--no-access-log",
        "--log-level",
        "warning",
        # A thousand streams may connect at once: the listen queue holds them.
        "--backlog",
        "4096",
        "--timeout-graceful-shutdown",
        "5",
        *(["--workers", str(workers)] if workers > 1 else []),
        "--host",
        host,
        "--port",
        str(port),
    ]
