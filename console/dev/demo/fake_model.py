"""A fake OpenAI-compatible model server on loopback, for the tests and the demo.

A real HTTP server (stdlib only, no Django), so the credential gateway talks to it as it
would to a provider: ``POST /v1/chat/completions`` with ``Authorization: Bearer <key>``,
answered as a chat completion or, with ``"stream": true``, as server-sent events
(``data: {chunk}`` ... ``data: [DONE]``). It refuses any other key (401), which is how
the tests show that the gateway injected the key and the worker never had it: every
request it receives is recorded with the credential it carried (``GET /_requests``).

Replies are deterministic: ``reply:`` followed by the last user message, or the text a
test scripted with ``POST /_control {"reply": "...", "chunks": N, "chunk_delay": S}``
(a stream sends the reply in ``chunks`` pieces, ``chunk_delay`` seconds apart).

    python -m console.dev.demo.fake_model --port 8767     # the key: STEWARD_MODEL_KEY

or in-process with ``FakeModel(key=...)`` (binds port 0, serves on a daemon thread).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeModel:
    def __init__(self, *, key: str, host: str = "127.0.0.1", port: int = 0, tool_key: str | None = None):
        if not key:
            raise ValueError("the fake model needs the key it will require")
        self.key, self.tool_key = key, tool_key
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.script = {"reply": None, "chunks": 4, "chunk_delay": 0.0}
        self.server = ThreadingHTTPServer((host, port), _handler(self))
        self.server.daemon_threads = True
        self.base = f"http://{host}:{self.server.server_address[1]}"
        self.url = self.base + "/v1"
        self.tool_url = self.base + "/tool"
        self.thread: threading.Thread | None = None

    def start(self) -> FakeModel:
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

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


def _pieces(text: str, n: int) -> list[str]:
    n = max(1, min(n, len(text) or 1))
    size = -(-len(text) // n) or 1
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _handler(model: FakeModel):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out as two writes. On a kept-alive connection (the gateway
        # reuses its connections to a provider), Nagle would hold the body back until the
        # client's delayed ACK of the headers, about 40 ms; real providers answer
        # without that wait.
        disable_nagle_algorithm = True

        def log_message(self, *args):  # quiet: the tests read /_requests, not a log
            pass

        def _json(self, status: int, value) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _read(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw) if raw else {}
            except ValueError:
                return None

        def _record(self, body) -> None:
            with model.lock:
                model.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "authorization": self.headers.get("Authorization"),
                        "idempotency_key": self.headers.get("Idempotency-Key"),
                        "headers": dict(self.headers.items()),
                        "body": body,
                    }
                )

        def _stray(self, body=None):
            """Any other path: recorded all the same, so a test sees whatever reached the
            server, wherever the gateway sent it."""
            self._record(body)
            return self._json(404, {"error": {"message": "not found"}})

        def _tool(self, body):
            """A stand-in outside API under /tool/: it needs the tool key and echoes the call."""
            self._record(body)
            if model.tool_key is None or self.headers.get("Authorization") != f"Bearer {model.tool_key}":
                return self._json(401, {"error": "invalid tool key"})
            return self._json(
                200,
                {
                    "id": f"op-{uuid.uuid4().hex[:12]}",
                    "method": self.command,
                    "path": self.path[len("/tool") :],
                    "json": body,
                },
            )

        def do_GET(self):
            if self.path == "/_requests":
                return self._json(200, model.recorded())
            if self.path.startswith("/tool/"):
                return self._tool(None)
            return self._stray()

        def do_DELETE(self):
            return self._tool(self._read()) if self.path.startswith("/tool/") else self._stray(self._read())

        do_PUT = do_PATCH = do_DELETE

        def do_POST(self):
            body = self._read()
            if self.path.startswith("/tool/"):
                return self._tool(body)
            if self.path == "/_control":
                model.set(**(body or {}))
                return self._json(200, model.script)
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._stray(body)
            self._record(body)
            with model.lock:
                script = dict(model.script)
            if self.headers.get("Authorization") != f"Bearer {model.key}":
                return self._json(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return self._json(400, {"error": {"message": "messages is required"}})
            ident = f"chatcmpl-{uuid.uuid4().hex[:24]}"
            text = model.reply_to(body)
            name = body.get("model", "fake")
            if not body.get("stream"):
                return self._json(
                    200,
                    {
                        "id": ident,
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": name,
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": len(text.split()), "total_tokens": 1},
                    },
                )
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            pieces = _pieces(text, int(script["chunks"]))
            try:
                for i, piece in enumerate(pieces):
                    if i and script["chunk_delay"]:
                        time.sleep(float(script["chunk_delay"]))
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
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except OSError:  # the gateway cut the stream: that is what some tests do
                pass

    return Handler


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
    model.server.serve_forever()


if __name__ == "__main__":
    main()
