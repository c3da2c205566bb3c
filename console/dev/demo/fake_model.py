"""A fake OpenAI-compatible model server on loopback, for the tests, the demo and the benches.

A real HTTP server (aiohttp's, no Django), so the credential gateway talks to it as it
would to a provider: ``POST /v1/chat/completions`` with ``Authorization: Bearer <key>``,
answered as a chat completion or, with ``"stream": true``, as server-sent events
(``data: {chunk}`` ... ``data: [DONE]``). It refuses any other key (401), which is how
the tests show that the gateway injected the key and the worker never had it: every
request it receives is recorded with the credential it carried (``GET /_requests``).

Replies are deterministic: ``reply:`` followed by the last user message, or the text a
test scripted with ``POST /_control {"reply": "...", "chunks": N, "chunk_delay": S}``
(a stream sends the reply in ``chunks`` pieces, ``chunk_delay`` seconds apart). It also
speaks the rest of the chat-completions format that the official `openai` client uses,
so agents written against it run offline:

* **Function calling.** A request with ``tools`` whose messages hold no ``tool`` answer
  yet is answered with a call of its first function (``finish_reason`` ``tool_calls``),
  its arguments made from the function's parameter schema (example()). Once a ``tool``
  message is there, the answer is text: ``tool said:`` and that message's content.
* **Structured output.** ``response_format`` ``{"type": "json_schema", ...}`` is
  answered with JSON that matches the schema (example(): strings are the last user
  message, numbers 1, booleans true, an array one item, an enum its first value).
* **Usage in streams.** ``stream_options.include_usage`` adds a last chunk with no
  choices and the usage, as OpenAI sends it, before ``[DONE]``.

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
        name = body.get("model", "fake")
        call = _tool_call(body)
        text = "" if call else self.answer(body)
        if not body.get("stream"):
            message: dict = {"role": "assistant", "content": None if call else text}
            if call:
                message["tool_calls"] = [call]
            return web.json_response(
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": name,
                    "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}],
                    "usage": _usage(text or json.dumps(call)),
                }
            )
        return await self._stream(request, script, ident, name, text, call=call, usage=_streams_usage(body))

    def answer(self, body: dict) -> str:
        """The text of a reply that is not a function call."""
        said = [m for m in body["messages"] if isinstance(m, dict) and m.get("role") == "tool"]
        if said and body.get("tools"):
            return f"tool said: {said[-1].get('content')}"
        kind = body.get("response_format") or {}
        if isinstance(kind, dict) and kind.get("type") == "json_schema":
            users = [m.get("content") for m in body["messages"] if isinstance(m, dict) and m.get("role") == "user"]
            schema = (kind.get("json_schema") or {}).get("schema") or {}
            return json.dumps(example(schema, str(users[-1]) if users else ""))
        return self.reply_to(body)

    async def _stream(
        self,
        request: web.Request,
        script: dict,
        ident: str,
        name: str,
        text: str,
        *,
        call: dict | None = None,
        usage: bool = False,
    ):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        response.force_close()  # as before: a stream's connection is not reused
        await response.prepare(request)
        key = request.headers.get("Idempotency-Key", "")
        pieces = _pieces(call["function"]["arguments"] if call else text, int(script["chunks"]))
        delay = float(script["chunk_delay"])
        with self.lock:
            self.streaming += 1
        try:
            for i, piece in enumerate(pieces):
                if i and delay:
                    await asyncio.sleep(delay)
                last = i == len(pieces) - 1
                chunk = {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "model": name,
                    "choices": [
                        {
                            "index": 0,
                            "delta": _call_delta(call, piece, first=i == 0) if call else {"content": piece},
                            "finish_reason": ("tool_calls" if call else "stop") if last else None,
                        }
                    ],
                }
                line = b"data: " + json.dumps(chunk).encode() + b"\n\n"
                await response.write(line)  # waits while the reader does not read
                with self.lock:
                    self.sent[key] += len(line)
            if usage:
                chunk = {"id": ident, "object": "chat.completion.chunk", "model": name, "choices": []}
                chunk["usage"] = _usage(text or json.dumps(call))
                await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
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


def _usage(text: str) -> dict:
    completion = len(text.split())
    return {"prompt_tokens": 1, "completion_tokens": completion, "total_tokens": 1 + completion}


def _streams_usage(body: dict) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _tool_call(body: dict) -> dict | None:
    """The function call that answers `body`: of its first tool, while no `tool` message
    has answered one yet; None otherwise."""
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools or not isinstance(tools[0], dict):
        return None
    if any(isinstance(m, dict) and m.get("role") == "tool" for m in body["messages"]):
        return None
    function = tools[0].get("function") or {}
    users = [m.get("content") for m in body["messages"] if isinstance(m, dict) and m.get("role") == "user"]
    arguments = example(function.get("parameters") or {"type": "object"}, str(users[-1]) if users else "")
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": str(function.get("name", "tool")), "arguments": json.dumps(arguments)},
    }


def _call_delta(call: dict, piece: str, *, first: bool) -> dict:
    """A stream's delta for one piece of `call`'s arguments: the first also names it."""
    if first:
        named = {"index": 0, "id": call["id"], "type": "function"}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{**named, "function": {"name": call["function"]["name"], "arguments": piece}}],
        }
    return {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}


def example(schema, text: str):
    """A value matching a simple JSON schema: `text` for strings, 1 for numbers, true,
    one item for arrays, every property of an object, the first of an enum."""
    if not isinstance(schema, dict):
        return text
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        return {name: example(sub, text) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [example(schema.get("items") or {}, text)]
    return {"integer": 1, "number": 1, "boolean": True, "null": None}.get(kind, text)


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
