"""Calling a provider: one HTTP/1.1 request on its own connection, with the real key
added here and nowhere else. Nothing the worker sent is forwarded as a header: the
capability token, and any tenant or actor header, stop at the gateway."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

from runtime.errors import UpstreamFailed

MAX_RESPONSE_BYTES = 4 * 1024 * 1024


class Upstream:
    """An answer being read: status, headers, and the body as lines (a stream) or whole."""

    def __init__(self, connection: http.client.HTTPConnection, response: http.client.HTTPResponse):
        self.connection, self.response = connection, response
        self.status = response.status

    def header(self, name: str) -> str | None:
        return self.response.getheader(name)

    def read(self) -> bytes:
        body = self.response.read(MAX_RESPONSE_BYTES + 1)
        if len(body) > MAX_RESPONSE_BYTES:
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
        self.connection.close()


def send(method: str, url: str, *, key_header: str, key_value: str, body: bytes | None, timeout: float,
         idempotency_key: str, accept: str = "application/json") -> Upstream:
    """Send the request; UpstreamFailed if the provider cannot be reached. The key is in
    one header of this request and in no message this raises."""
    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=timeout)
    headers = {key_header: key_value, "Accept": accept, "Idempotency-Key": idempotency_key}
    if body is not None:
        headers["Content-Type"] = "application/json"
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request(method, target or "/", body=body, headers=headers)
        response = connection.getresponse()
    except (OSError, http.client.HTTPException) as exc:
        connection.close()
        raise UpstreamFailed(f"the provider did not answer: {type(exc).__name__}") from None
    return Upstream(connection, response)
