"""Calling a provider: one HTTP/1.1 request, with the real key added here and nowhere
else. Nothing the worker sent is forwarded as a header: the capability token, and any
tenant or actor header, stop at the gateway.

Connections are kept alive and reused, a few per provider per process (`_idle`): a new
connection per call cost a connect (and for https a TLS handshake, tens of
milliseconds to a real provider) on every call. A connection goes back only once its
answer was read to the end and the provider did not ask to close it. A stream cut
midway, a read that failed, or an answer over the limit closes it instead. An idle
connection the provider has since closed is found before it is used (a readable idle
socket is a closed one). If the provider closes one while the request is being sent on
it, the request is sent once more on a new connection: a server closes only a
connection it considers idle, so it has not acted on that request, and the request
carries the worker's Idempotency-Key anyway. A connection carries no credential of its
own: each request sets the key header of the route it serves.
"""

from __future__ import annotations

import http.client
import json
import select
import threading
from urllib.parse import urlsplit

from runtime.errors import UpstreamFailed

MAX_RESPONSE_BYTES = 4 * 1024 * 1024
MAX_IDLE = 4  # kept connections per provider (scheme, host, port) per process

_idle: dict[tuple, list[http.client.HTTPConnection]] = {}
_lock = threading.Lock()  # gunicorn's sync worker has one thread; runserver and gthread have more
# What a kept connection the provider closed raises when it is used again.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class Upstream:
    """An answer being read: status, headers, and the body as lines (a stream) or whole."""

    def __init__(self, connection: http.client.HTTPConnection, response: http.client.HTTPResponse, origin: tuple):
        self.connection, self.response, self.origin = connection, response, origin
        self.status = response.status
        self.failed = False

    def header(self, name: str) -> str | None:
        return self.response.getheader(name)

    def read(self) -> bytes:
        try:
            body = self.response.read(MAX_RESPONSE_BYTES + 1)
        except (OSError, http.client.HTTPException):
            self.failed = True
            raise
        if len(body) > MAX_RESPONSE_BYTES:
            self.failed = True
            raise UpstreamFailed(f"the provider's answer is over {MAX_RESPONSE_BYTES} bytes", status=self.status)
        return body

    def json(self):
        try:
            return json.loads(self.read())
        except ValueError:
            raise UpstreamFailed("the provider's answer is not JSON", status=self.status) from None

    def lines(self):
        while True:
            line = self.response.readline(MAX_RESPONSE_BYTES)
            if not line:
                return
            yield line

    def close(self) -> None:
        """Keep the connection for the next call if its answer was read whole and the
        provider keeps it open; close it otherwise."""
        reusable = not self.failed and self.response.isclosed() and not self.response.will_close
        connection, self.connection = self.connection, None
        if connection is None:
            return
        if reusable:
            _give(self.origin, connection)
        else:
            connection.close()


def send(
    method: str,
    url: str,
    *,
    key_header: str,
    key_value: str,
    body: bytes | None,
    timeout: float,
    idempotency_key: str,
    accept: str = "application/json",
) -> Upstream:
    """Send the request; UpstreamFailed if the provider cannot be reached. The key is in
    one header of this request and in no message this raises."""
    parts = urlsplit(url)
    origin = (parts.scheme, parts.hostname, parts.port)
    headers = {key_header: key_value, "Accept": accept, "Idempotency-Key": idempotency_key}
    if body is not None:
        headers["Content-Type"] = "application/json"
    target = (parts.path + (f"?{parts.query}" if parts.query else "")) or "/"
    connection = _take(origin)
    if connection is not None:
        try:
            return Upstream(connection, _exchange(connection, method, target, body, headers, timeout), origin)
        except _STALE:
            connection.close()  # closed by the provider as we sent: once more on a new connection
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            raise UpstreamFailed(f"the provider did not answer: {type(exc).__name__}") from None
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=timeout)
    try:
        return Upstream(connection, _exchange(connection, method, target, body, headers, timeout), origin)
    except (OSError, http.client.HTTPException) as exc:
        connection.close()
        raise UpstreamFailed(f"the provider did not answer: {type(exc).__name__}") from None


def _exchange(connection, method: str, target: str, body, headers: dict, timeout: float):
    connection.timeout = timeout
    if connection.sock is not None:
        connection.sock.settimeout(timeout)
    connection.request(method, target, body=body, headers=headers)
    return connection.getresponse()


def _take(origin: tuple) -> http.client.HTTPConnection | None:
    """A kept connection to `origin` that is still open, or None."""
    while True:
        with _lock:
            kept = _idle.get(origin)
            connection = kept.pop() if kept else None
        if connection is None:
            return None
        sock = connection.sock
        # An idle connection has nothing to read: readable means the provider closed it
        # (or sent something unasked for). Either way it is not used again.
        if sock is not None and not select.select([sock], [], [], 0)[0]:
            return connection
        connection.close()


def _give(origin: tuple, connection: http.client.HTTPConnection) -> None:
    with _lock:
        kept = _idle.setdefault(origin, [])
        if len(kept) < MAX_IDLE:
            kept.append(connection)
            return
    connection.close()
