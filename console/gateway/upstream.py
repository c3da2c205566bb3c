"""Calling a provider: one HTTP/1.1 request, with the real key added here and nowhere
else. Nothing the worker sent is forwarded as a header: the capability token, and any
tenant or actor header, stop at the gateway.

Async, on the process's event loop (docs/adr/0031-asgi-gateway.md): one aiohttp
ClientSession per loop, whose connector keeps connections alive and reuses them, per
provider (scheme, host, port). A new connection per call cost a connect (and for https a
TLS handshake, tens of milliseconds to a real provider) on every call. A connection goes
back only once its answer was read to the end and the provider did not ask to close it;
a stream cut midway, a read that failed, or an answer over the limit closes it instead,
and the connector drops an idle one the provider closed. If the provider closes a kept
connection while a POST is being sent on it, the request is sent once more on a new
connection: a server closes only a connection it considers idle, so it has not acted
on that request, and a keyed request carries the worker's Idempotency-Key anyway (aiohttp
does the same itself for the idempotent methods). A connection carries no credential of
its own: each request sets the key header of the route it serves.

Reading is bounded: a whole answer at MAX_RESPONSE_BYTES, one line of a stream at
MAX_LINE_BYTES, and a stream's unread bytes at aiohttp's read buffer (READ_BUFFER_BYTES,
twice that before it stops reading the socket): a worker that stops reading a stream
makes the gateway stop reading the provider, it does not make it buffer the stream.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import aiohttp
from yarl import URL

from runtime.errors import UpstreamFailed

MAX_RESPONSE_BYTES = 4 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024  # one server-sent event's line
READ_BUFFER_BYTES = 64 * 1024
KEEPALIVE_SECONDS = 15.0
# What a kept connection the provider closed raises when it is used again.
_STALE = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)
_IDEMPOTENT = {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"}

_sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}


async def _reused(session, ctx, params) -> None:
    ctx.trace_request_ctx.reused = True


def session() -> aiohttp.ClientSession:
    """This loop's session (a loop is a process's, under an ASGI server)."""
    loop = asyncio.get_running_loop()
    kept = _sessions.get(loop)
    if kept is None or kept.closed:
        for other in [each for each in _sessions if each.is_closed()]:
            del _sessions[other]  # a loop that ended (tests): its session went with it
        trace = aiohttp.TraceConfig()
        trace.on_connection_reuseconn.append(_reused)
        kept = _sessions[loop] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=0,  # no bound across providers: the ASGI server bounds the requests
                limit_per_host=0,
                keepalive_timeout=KEEPALIVE_SECONDS,
                enable_cleanup_closed=False,
            ),
            trace_configs=[trace],
            # Forward exactly the URL built here (runtime/gateway/paths.py encoded it once).
            requote_redirect_url=False,
            read_bufsize=READ_BUFFER_BYTES,
            auto_decompress=True,
            # No proxy from the environment ever sees a key.
            trust_env=False,
            skip_auto_headers=("User-Agent",),
        )
    return kept


async def close_sessions() -> None:
    """Close this loop's session (at shutdown; tests)."""
    kept = _sessions.pop(asyncio.get_running_loop(), None)
    if kept is not None:
        await kept.close()


class Upstream:
    """An answer being read: status, headers, and the body as lines (a stream) or whole."""

    def __init__(self, response: aiohttp.ClientResponse):
        self.response = response
        self.status = response.status
        self.failed = False

    def header(self, name: str) -> str | None:
        return self.response.headers.get(name)

    async def read(self) -> bytes:
        parts, size = [], 0
        try:
            while True:
                part = await self.response.content.readany()
                if not part:
                    break
                size += len(part)
                if size > MAX_RESPONSE_BYTES:
                    self.failed = True
                    raise UpstreamFailed(
                        f"the provider's answer is over {MAX_RESPONSE_BYTES} bytes", status=self.status
                    )
                parts.append(part)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self.failed = True
            raise UpstreamFailed(f"the provider's answer could not be read: {type(exc).__name__}") from None
        return b"".join(parts)

    async def json(self):
        raw = await self.read()
        try:
            return json.loads(raw)
        except ValueError:
            raise UpstreamFailed("the provider's answer is not JSON", status=self.status) from None

    async def lines(self):
        """The body's lines as they come; UpstreamFailed if one is over MAX_LINE_BYTES or
        the read fails (a timeout between chunks included)."""
        content = self.response.content
        while True:
            try:
                line = await content.readuntil(b"\n", max_size=MAX_LINE_BYTES)
            except (aiohttp.ClientPayloadError, ValueError) as exc:  # LineTooLong is a ValueError too
                self.failed = True
                raise UpstreamFailed(f"the provider's stream could not be read: {type(exc).__name__}") from None
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                self.failed = True
                raise UpstreamFailed(f"the provider's stream could not be read: {type(exc).__name__}") from None
            if not line:
                return
            yield line

    def close(self) -> None:
        """Keep the connection for the next call if its answer was read whole and the
        provider keeps it open; close it otherwise (aiohttp's release does that test)."""
        if self.failed or not self.response.content.at_eof():
            self.response.close()
        else:
            self.response.release()


async def send(
    method: str,
    url: str,
    *,
    key_header: str,
    key_value: str,
    body: bytes | None,
    timeout: float,
    idempotency_key: str | None,
    accept: str = "application/json",
) -> Upstream:
    """Send the request; UpstreamFailed if the provider cannot be reached. The key is in
    one header of this request and in no message this raises. `timeout` bounds the
    connect and each wait for data (the answer's head, then each chunk), not the whole
    answer: a stream may last as long as its chunks keep coming."""
    headers = {key_header: key_value, "Accept": accept}
    if idempotency_key is not None:  # an unkeyed call (no key from the caller) goes without one
        headers["Idempotency-Key"] = idempotency_key
    if body is not None:
        headers["Content-Type"] = "application/json"
    bounds = aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)
    target = URL(url, encoded=True)
    for last in (False, True):
        ctx = SimpleNamespace(reused=False)
        try:
            response = await session().request(
                method,
                target,
                headers=headers,
                data=body,
                timeout=bounds,
                allow_redirects=False,
                trace_request_ctx=ctx,
            )
        except _STALE as exc:
            if last or not ctx.reused or method in _IDEMPOTENT:
                raise UpstreamFailed(f"the provider did not answer: {type(exc).__name__}") from None
            continue  # closed by the provider as we sent: once more on a new connection
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
            raise UpstreamFailed(f"the provider did not answer: {type(exc).__name__}") from None
        return Upstream(response)
    raise AssertionError("unreachable")
