"""console/gateway/upstream.py keeps provider connections alive: reused when an answer
was read whole, never when the provider closed it or a stream was left unread, and a
kept connection the provider closed is replaced without failing the call. No database."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from console.gateway import upstream


class Provider:
    """A loopback HTTP/1.1 server that counts the connections it accepted. With
    `hang_up`, it closes each connection after its answer without saying so (no
    `Connection: close`): the client holds a kept connection that is already closed."""

    def __init__(self, *, hang_up: bool = False):
        self.connections = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                provider.connections += 1

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                data = b'{"ok": true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = hang_up

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/x"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def no_kept_connections():
    upstream._idle.clear()
    yield
    for kept in upstream._idle.values():
        for connection in kept:
            connection.close()
    upstream._idle.clear()


def call(url: str) -> dict:
    answer = upstream.send(
        "POST", url, key_header="Authorization", key_value="Bearer k", body=b"{}", timeout=5, idempotency_key="k-1"
    )
    try:
        return answer.json()
    finally:
        answer.close()


def test_calls_one_after_another_share_one_kept_connection():
    provider = Provider()
    try:
        assert [call(provider.url) for _ in range(5)] == [{"ok": True}] * 5
        assert provider.connections == 1
    finally:
        provider.stop()


def test_a_connection_the_provider_closed_is_replaced_and_the_call_still_answers():
    provider = Provider(hang_up=True)
    try:
        assert [call(provider.url) for _ in range(3)] == [{"ok": True}] * 3
        assert provider.connections == 3
    finally:
        provider.stop()


def test_a_closed_connection_used_before_it_was_seen_closed_is_sent_again_on_a_new_one(monkeypatch):
    provider = Provider(hang_up=True)
    monkeypatch.setattr(upstream.select, "select", lambda r, w, x, t: ([], [], []))  # blind to the hang-up
    try:
        assert call(provider.url) == {"ok": True}
        threading.Event().wait(0.05)  # the provider has closed its end
        assert call(provider.url) == {"ok": True}
        assert provider.connections == 2
    finally:
        provider.stop()


def test_an_answer_left_unread_closes_its_connection():
    provider = Provider()
    try:
        answer = upstream.send(
            "POST",
            provider.url,
            key_header="Authorization",
            key_value="Bearer k",
            body=b"{}",
            timeout=5,
            idempotency_key="k-1",
        )
        answer.close()  # a stream cut midway: the rest of the answer is still on the wire
        assert upstream._idle.get(("http", "127.0.0.1", provider.server.server_address[1])) in (None, [])
        assert call(provider.url) == {"ok": True}
        assert provider.connections == 2
    finally:
        provider.stop()
