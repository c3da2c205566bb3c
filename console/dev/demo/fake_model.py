"""A fake OpenAI-compatible model server on loopback, for the tests, the demo and the benches.

A real HTTP server (aiohttp's, no Django), so the credential gateway talks to it as it
would to a provider: ``POST /v1/chat/completions`` with ``Authorization: Bearer <key>``,
answered as a chat completion or, with ``"stream": true``, as server-sent events
(``data: {chunk}`` ... ``data: [DONE]``). It refuses any other key (401), which is how
the tests show that the gateway injected the key and the worker never had it: every
request it receives is recorded with the credential it carried (``GET /_requests``).

Replies are deterministic: ``reply:`` followed by the last user message, or the text a
test scripted with ``POST /_control {"reply": "...", "chunks": N, "chunk_delay": S}``
(a stream sends the reply in ``chunks`` pieces, ``chunk_delay`` seconds apart).

It is asynchronous, one event loop in a thread of its own, so one process serves
thousands of slow streams at once (`make bench-dense` streams a thousand replies of a
minute each through the gateway). A stream's writes wait while its reader does not read:
`sent` counts, per Idempotency-Key, the bytes a stream has handed to its socket, which is
how a test sees that a gateway whose worker stopped reading stopped reading here too.

    python -m console.dev.demo.fake_model --port 8767     # the key: STEWARD_MODEL_KEY

or in-process with ``FakeModel(key=...)`` (binds port 0, serves on a daemon thread).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import threading
import time
import uuid
from collections import Counter

from aiohttp import web


class FakeModel:
    def __init__(self, *, key: str, host: str = "127.0.0.1", port: int = 0, tool_key: str | None = None):
        if not key:
            raise ValueError("the fake model needs the key it will require")
        self.key, self.tool_key = key, tool_key
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.sent: Counter = Counter()  # per Idempotency-Key: bytes of its streams written so far
        self.streaming = 0  # streams being written now
        self.script = {"reply": None, "chunks": 4, "chunk_delay": 0.0}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(4096)  # a thousand streams may connect at once
        self.base = f"http://{host}:{self.sock.getsockname()[1]}"
        self.url = self.base + "/v1"
        self.tool_url = self.base + "/tool"
        self.thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._stopped = threading.Event()

    def start(self) -> FakeModel:
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(ready,), daemon=True, name="fake-model")
        self.thread.start()
        ready.wait(30)
        return self

    def _serve(self, ready: threading.Event) -> None:
        self._loop = loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        loop.run_until_complete(self._runner.setup())
        loop.run_until_complete(web.SockSite(self._runner, self.sock).start())
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._runner.cleanup())
            loop.close()
            self._stopped.set()

    def serve_forever(self) -> None:
        """Serve in this thread until stop() (the command line)."""
        self._serve(threading.Event())

    def stop(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._stopped.wait(10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def set(self, **script) -> None:
        with self.lock:
            self.script.update(script)

    def recorded(self) -> list[dict]:
        with self.lock:
            return [dict(r) for r in self.requests]

    def reply_to(self, body: dict) -> str:
        scripted = self.script["reply"]
        if scripted is not None:
            return scripted
        users = [m.get("content") for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
        return f"reply: {users[-1] if users else ''}"

    # --- the server --------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else (None if request.method == "GET" else {})
        except ValueError:
            body = None
        path = request.raw_path  # as sent: still percent-encoded, with its query
        if path.startswith("/tool/"):
            return self._tool(request, path, body)
        if request.method == "GET" and path == "/_requests":
            return web.json_response(self.recorded())
        if request.method == "POST" and path == "/_control":
            self.set(**(body or {}))
            return web.json_response(self.script)
        if request.method != "POST" or path.rstrip("/") != "/v1/chat/completions":
            # Any other path: recorded all the same, so a test sees whatever reached the
            # server, wherever the gateway sent it.
            self._record(request, path, body)
            return web.json_response({"error": {"message": "not found"}}, status=404)
        self._record(request, path, body)
        with self.lock:
            script = dict(self.script)
        if request.headers.get("Authorization") != f"Bearer {self.key}":
            return web.json_response(
                {"error": {"message": "invalid api key", "type": "invalid_request_error"}}, status=401
            )
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return web.json_response({"error": {"message": "messages is required"}}, status=400)
        ident = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        text = self.reply_to(body)
        name = body.get("model", "fake")
        if not body.get("stream"):
            return web.json_response(
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": name,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": len(text.split()), "total_tokens": 1},
                }
            )
        return await self._stream(request, script, ident, name, text)

    async def _stream(self, request: web.Request, script: dict, ident: str, name: str, text: str):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        response.force_close()  # as before: a stream's connection is not reused
        await response.prepare(request)
        key = request.headers.get("Idempotency-Key", "")
        pieces = _pieces(text, int(script["chunks"]))
        delay = float(script["chunk_delay"])
        with self.lock:
            self.streaming += 1
        try:
            for i, piece in enumerate(pieces):
                if i and delay:
                    await asyncio.sleep(delay)
                chunk = {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "model": name,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"content": piece},
                            "finish_reason": "stop" if i == len(pieces) - 1 else None,
                        }
                    ],
                }
                line = b"data: " + json.dumps(chunk).encode() + b"\n\n"
                await response.write(line)  # waits while the reader does not read
                with self.lock:
                    self.sent[key] += len(line)
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):  # the gateway cut the stream: some tests do
            pass
        finally:
            with self.lock:
                self.streaming -= 1
        return response

    def _record(self, request: web.Request, path: str, body) -> None:
        with self.lock:
            self.requests.append(
                {
                    "method": request.method,
                    "path": path,
                    "authorization": request.headers.get("Authorization"),
                    "idempotency_key": request.headers.get("Idempotency-Key"),
                    "headers": dict(request.headers.items()),
                    "body": body,
                }
            )

    def _tool(self, request: web.Request, path: str, body) -> web.Response:
        """A stand-in outside API under /tool/: it needs the tool key and echoes the call."""
        self._record(request, path, body)
        if self.tool_key is None or request.headers.get("Authorization") != f"Bearer {self.tool_key}":
            return web.json_response({"error": "invalid tool key"}, status=401)
        return web.json_response(
            {
                "id": f"op-{uuid.uuid4().hex[:12]}",
                "method": request.method,
                "path": path[len("/tool") :],
                "json": body,
            }
        )


def _pieces(text: str, n: int):
    n = max(1, min(n, len(text) or 1))
    size = -(-len(text) // n) or 1
    return _Slices(text, size) if text else [""]


class _Slices:
    """The reply's pieces, sliced as they are sent (a test's reply may be tens of MB)."""

    def __init__(self, text: str, size: int):
        self.text, self.size = text, size

    def __len__(self) -> int:
        return (len(self.text) + self.size - 1) // self.size

    def __iter__(self):
        return (self.text[i : i + self.size] for i in range(0, len(self.text), self.size))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8767)
    args = parser.parse_args(argv)
    key = os.environ.get("STEWARD_MODEL_KEY")
    if not key:
        raise SystemExit("fake_model: set STEWARD_MODEL_KEY, the key it requires")
    model = FakeModel(key=key, host=args.host, port=args.port)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=model.stop, daemon=True).start())
    print(f"fake model on {model.url}", flush=True)
    model.serve_forever()


if __name__ == "__main__":
    main()
