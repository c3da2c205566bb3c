"""console/gateway/upstream.py keeps provider connections alive: reused when an answer
was read whole, never when the provider closed it or a stream was left unread; a POST
the provider drops on a kept connection is sent once more on a new one, a POST dropped
on a new connection is not (the provider may have acted on it). No database."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from console.gateway import upstream
from runtime.errors import UpstreamFailed


class Provider:
    """A loopback HTTP/1.1 server that counts the connections it accepted and the
    requests it read. With `hang_up`, it closes each connection after its answer without
    saying so (no `Connection: close`). With `drop`, it reads the request numbered so on
    a connection (1: the first) and closes that connection without answering. With
    `slow`, the first answer's body comes in two parts a second apart (a stream)."""

    def __init__(self, *, hang_up: bool = False, drop: int | None = None, slow: bool = False):
        self.connections = 0
        self.requests = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                provider.connections += 1
                self.seen = 0

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                provider.requests += 1
                self.seen += 1
                if self.seen == drop:
                    self.close_connection = True
                    return  # read, and never answered
                data = b'{"ok": true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if slow and provider.requests == 1:
                    self.wfile.write(data[:4])
                    self.wfile.flush()
                    threading.Event().wait(1.0)
                    data = data[4:]
                try:
                    self.wfile.write(data)
                except OSError:  # the client went away midway
                    self.close_connection = True
                    return
                self.close_connection = hang_up

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/x"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def provider(request):
    started = Provider(**getattr(request, "param", {}))
    yield started
    started.stop()


async def call(url: str) -> dict:
    answer = await upstream.send(
        "POST", url, key_header="Authorization", key_value="Bearer k", body=b"{}", timeout=5, idempotency_key="k-1"
    )
    try:
        return await answer.json()
    finally:
        answer.close()


def run(calls):
    """Run `calls` (a coroutine function) on a loop of its own, its session closed after,
    in a thread of its own: a browser test earlier in this process leaves Playwright's
    loop running on the main thread, where asyncio.run() refuses to start another."""

    async def scenario():
        try:
            return await calls()
        finally:
            await upstream.close_sessions()

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, scenario()).result()


def test_calls_one_after_another_share_one_kept_connection(provider):
    async def calls():
        return [await call(provider.url) for _ in range(5)]

    assert run(calls) == [{"ok": True}] * 5
    assert provider.connections == 1


@pytest.mark.parametrize("provider", [{"hang_up": True}], indirect=True)
def test_a_connection_the_provider_closed_is_replaced_and_the_call_still_answers(provider):
    async def calls():
        answers = []
        for _ in range(3):
            answers.append(await call(provider.url))
            await asyncio.sleep(0.05)  # the provider has closed its end
        return answers

    assert run(calls) == [{"ok": True}] * 3
    assert provider.connections == 3


@pytest.mark.parametrize("provider", [{"drop": 2}], indirect=True)
def test_a_post_dropped_on_a_kept_connection_is_sent_again_on_a_new_one(provider):
    async def calls():
        return [await call(provider.url), await call(provider.url)]

    assert run(calls) == [{"ok": True}] * 2
    assert (provider.connections, provider.requests) == (2, 3)  # the dropped one was sent again


@pytest.mark.parametrize("provider", [{"drop": 1}], indirect=True)
def test_a_post_dropped_on_a_new_connection_is_not_sent_again(provider):
    async def calls():
        with pytest.raises(UpstreamFailed, match="did not answer"):
            await call(provider.url)

    run(calls)
    assert (provider.connections, provider.requests) == (1, 1)


@pytest.mark.parametrize("provider", [{"slow": True}], indirect=True)
def test_an_answer_left_unread_closes_its_connection(provider):
    async def calls():
        answer = await upstream.send(
            "POST",
            provider.url,
            key_header="Authorization",
            key_value="Bearer k",
            body=b"{}",
            timeout=5,
            idempotency_key="k-1",
        )
        answer.close()  # a stream cut midway: the rest of the answer is still to come
        return await call(provider.url)

    assert run(calls) == {"ok": True}
    assert provider.connections == 2
