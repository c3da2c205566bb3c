"""A model stream relayed chunk by chunk, and the one watcher that re-checks every stream
of the process at once (docs/adr/0031-asgi-gateway.md).

**The relay** is what Django's ASGI handler iterates (a StreamingHttpResponse's
content): each step reads the provider's next line, passes a chunk on, and ends the
stream with `[DONE]`, with a terminal error event, or with a cut. Its call is finished
exactly once, however the stream ends: awaited at its natural end (before the response
ends, so a worker that read `[DONE]` finds the call recorded), or, when the worker went
away or the stream was abandoned, in a database thread (console/gateway/database.py)
from Django's close of the response.

**The watcher** replaces a re-check per stream between its chunks: every
RECHECK_SECONDS one statement reads, for all of the process's streams, their tenants'
authz_revision and their tasks' status (services.gateway_recheck); only a stream whose
authority may have changed is decided again (services.gateway_redecide, a recorded
decision). A denial cuts the stream at once, not at its next chunk: the relay's pending
read is interrupted and the relay ends with AUTHZ_REVOKED or TASK_STOPPED. A thousand
streams cost ten statements a second, not ten thousand, and hold no connection between
them.

**A worker that stops reading** holds the relay at its last chunk (the ASGI server
stops taking more until the socket drains), so the gateway stops reading the provider
too: nothing is buffered beyond the sockets' and aiohttp's bounded buffers
(console/gateway/upstream.py). Such a stream is ended by force when it has been held
for the gateway's timeout (TIMEOUT_SECONDS, as for a provider silent that long), or
STUCK_CUT_SECONDS after a denial it cannot deliver: its call is recorded partial, cut
by that denial, so a stop's acknowledgment still comes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

from django.conf import settings

from console.gateway.database import statements
from console.gateway.upstream import Upstream
from runtime.errors import UpstreamFailed
from runtime.gateway import services
from runtime.gateway.services import RECHECK_SECONDS, model_resource

log = logging.getLogger(__name__)

STREAM_CUT = "AUTHZ_REVOKED"  # the terminal SSE event of a stream whose authority went away
STREAM_STOPPED = "TASK_STOPPED"  # ... and of a stream whose task was stopped (runtime/stops/)
# How long a denied stream whose worker is not reading may stay held before it is ended
# without its terminal event (the event cannot reach a worker that does not read).
STUCK_CUT_SECONDS = 0.5


class Interrupted(Exception):
    """Raised into a relay's pending read when its stream is cut."""


def data(value) -> bytes:
    return b"data: " + json.dumps(value).encode() + b"\n\n"


def denial_details(decision) -> dict:
    return {
        "boundary": decision.boundary,
        "reason_code": decision.reason_code,
        "decision_id": str(decision.id),
        "policy_version": decision.policy_version,
        "authz_revision": decision.authz_revision,
        "action": decision.action,
        "resource": decision.resource,
    }


def error_event(code: str, message: str, details: dict) -> bytes:
    """A stream's terminal error: the gateway's refusal shape, and the same code and
    message under `error` as OpenAI sends one mid-stream, so that the official `openai`
    client raises APIError (its `code` the gateway's) rather than taking the event for
    one more chunk."""
    return b"event: error\n" + data(
        {"code": code, "message": message, "details": details, "error": {"code": code, "message": message}}
    )


def cut_event(decision) -> bytes:
    if decision.reason_code == "task_stopped":
        return error_event(
            STREAM_STOPPED, "the stream's task was stopped: the gateway cut it", denial_details(decision)
        )
    return error_event(
        STREAM_CUT,
        f"the stream's authority changed: {decision.action} on {decision.resource} "
        f"is now denied at {decision.boundary} ({decision.reason_code})",
        denial_details(decision),
    )


def _upstream_error(message: str) -> bytes:
    return error_event(UpstreamFailed.code, message, {})


class Relay:
    """One stream: an async iterator of the bytes to send, and its call's end."""

    def __init__(self, admission, answer: Upstream, model: str, *, prompt: int):
        self.admission, self.answer, self.model, self.prompt = admission, answer, model, prompt
        self.loop = asyncio.get_running_loop()
        self.lines = answer.lines()
        self.text: list[str] = []
        self.tool_calls: dict[int, dict] = {}  # function calls the stream delivered, by index, as pieced together
        self.ident = self.finish_reason = self.usage = None
        self.ended: str | None = None  # committed, partial or failed: set once the last bytes are chosen
        self.cut_by: str | None = None
        self.denial = None  # the denying Decision, once the watcher decided one
        self.deciding = False
        self.reading = False  # awaiting the provider's next line
        self.held_since: float | None = None  # when it handed bytes over and is waiting to be asked again
        self.task: asyncio.Task | None = None  # the task iterating it (Django's), to end it by force
        self.last = False
        self._finished = False
        self._lock = threading.Lock()
        watch().add(self)

    def __aiter__(self):
        return self

    async def __anext__(self) -> bytes:
        self.held_since = None
        if self.task is None:
            self.task = asyncio.current_task()
        if self.last:
            await self._finish_awaited()
            raise StopAsyncIteration
        try:
            out = await self._next()
        except BaseException:
            # Cancelled (the worker hung up, or the stream was ended by force) or a bug:
            # whatever was delivered is partial.
            self._finish_later(self.ended or "partial")
            raise
        self.held_since = time.monotonic()
        return out

    async def _next(self) -> bytes:
        while True:
            if self.denial is not None:
                return self._end("partial", cut_event(self.denial), cut_by=self.denial.reason_code)
            self.reading = True
            try:
                line = await anext(self.lines)
            except StopAsyncIteration:
                # The provider closed the stream before [DONE].
                return self._end("partial", _upstream_error("the provider ended the stream early"))
            except Interrupted:
                continue  # cut: the denial is set
            except UpstreamFailed as exc:
                return self._end("partial", _upstream_error(exc.message))
            finally:
                self.reading = False
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                return self._end("committed", b"data: [DONE]\n\n")
            try:
                chunk = json.loads(payload)
                self.usage = chunk.get("usage") or self.usage  # stream_options.include_usage: the last chunk's
                if not chunk.get("choices") and self.usage:
                    return b"data: " + payload + b"\n\n"
                choice = chunk["choices"][0]
                self.ident = self.ident or chunk.get("id")
                delta = choice.get("delta") or {}
                self.text.append(delta.get("content") or "")
                for piece in delta.get("tool_calls") or ():
                    self._tool_call(piece)
                self.finish_reason = choice.get("finish_reason") or self.finish_reason
            except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                return self._end(
                    "failed", _upstream_error("the provider sent a chunk that is not a chat completion chunk")
                )
            return b"data: " + payload + b"\n\n"

    def _tool_call(self, piece: dict) -> None:
        """One chunk's piece of a function call (its id and name come first, its
        arguments in fragments), added to what the call's record will hold."""
        index = piece["index"]
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError("a tool call's index is an integer")  # read as a chunk that is not one
        services.tool_call_piece(self.tool_calls, index, piece)

    def _end(self, ended: str, last: bytes, *, cut_by: str | None = None) -> bytes:
        self.ended, self.cut_by, self.last = ended, cut_by, True
        return last

    def cut(self, denial) -> None:
        """The watcher decided a denial: end the stream at once (on the loop)."""
        if self.denial is not None or self.last:
            return
        self.denial = denial
        if self.reading:
            self.answer.response.content.set_exception(Interrupted())

    # --- the call's one end ---------------------------------------------------------------

    def _take_finish(self, outcome: str) -> dict | None:
        """The finish's arguments, the first time only (from the loop or a thread)."""
        with self._lock:
            if self._finished:
                return None
            self._finished = True
        message: dict = {"role": "assistant", "content": "".join(self.text)}
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        completion = {
            "id": self.ident,
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
        }
        return {
            "outcome": outcome,
            "status": self.answer.status,
            "receipt": {
                "id": self.ident,
                "status": self.answer.status,
                "model": self.model,
                "chunks": len(self.text),
                "stream": True,
                **({"cut_by": self.cut_by} if self.cut_by else {}),
            },
            "response": services.untrusted(model_resource(self.model), body=completion),
            # No usage chunk (or a stream cut before it): each chunk delivered counts as
            # one token, plus the prompt's guess.
            "tokens": services.usage_tokens(self.usage, fallback=self.prompt + len(self.text)),
        }

    def _release(self) -> None:
        """On the loop: the provider's connection goes back (or is closed), and the watcher forgets it."""
        watch().discard(self)
        self.answer.close()

    async def _finish_awaited(self) -> None:
        self._release()
        finish = self._take_finish(self.ended or "partial")
        if finish is not None:
            await statements.run(services.gateway_finish, self.admission, **finish)

    def _finish_later(self, outcome: str) -> None:
        self._release()
        finish = self._take_finish(outcome)
        if finish is not None:
            statements.submit(services.gateway_finish, self.admission, **finish)

    def close(self) -> None:
        """Django's close of the response (a resource closer, run in a thread): a stream
        that did not reach its natural end (never iterated, the worker went away, ended by
        force) is finished partial, with the denial that cut it if there was one."""
        if self._finished:
            return
        if self.denial is not None and self.cut_by is None:
            self.cut_by = self.denial.reason_code
        try:
            self.loop.call_soon_threadsafe(self._finish_later, self.ended or "partial")
        except RuntimeError:  # the loop is gone (shutdown): finish from here
            finish = self._take_finish(self.ended or "partial")
            if finish is not None:
                statements.submit(services.gateway_finish, self.admission, **finish)

    def held_too_long(self, now: float, timeout: float) -> bool:
        if self.held_since is None or self.task is None or self.task.done():
            return False
        held = now - self.held_since
        return held > timeout or (self.denial is not None and held > STUCK_CUT_SECONDS)


class Watch:
    """Every relay of one event loop, re-checked together while any is open."""

    def __init__(self):
        self.relays: dict[object, Relay] = {}
        self.running: asyncio.Task | None = None
        self._deciding: set[asyncio.Task] = set()

    def add(self, relay: Relay) -> None:
        self.relays[relay.admission.call_id] = relay
        if self.running is None or self.running.done():
            self.running = asyncio.get_running_loop().create_task(self._run(), name="gateway-watch")

    def discard(self, relay: Relay) -> None:
        self.relays.pop(relay.admission.call_id, None)

    async def _run(self) -> None:
        timeout = settings.GATEWAY["TIMEOUT_SECONDS"]
        while self.relays:
            await asyncio.sleep(RECHECK_SECONDS)
            now = time.monotonic()
            for relay in list(self.relays.values()):
                if relay.held_too_long(now, timeout):
                    # Its worker does not read: end it (Django closes the response, and
                    # the relay's close() finishes the call partial).
                    log.warning("gateway: ending call %s, its worker stopped reading", relay.admission.call_id)
                    self.discard(relay)
                    relay.task.cancel()
            asking = [r for r in self.relays.values() if r.denial is None and not r.deciding and not r.last]
            if not asking:
                continue
            try:
                changed = await statements.run(services.gateway_recheck, [r.admission for r in asking])
            except Exception:
                log.exception("gateway: re-checking %d streams failed; trying again", len(asking))
                continue
            for admission in changed:
                relay = self.relays.get(admission.call_id)
                if relay is not None and not relay.deciding:
                    relay.deciding = True
                    task = asyncio.get_running_loop().create_task(self._decide(relay))
                    self._deciding.add(task)
                    task.add_done_callback(self._deciding.discard)

    async def _decide(self, relay: Relay) -> None:
        try:
            denial = await statements.run(services.gateway_redecide, relay.admission)
        except Exception:
            log.exception(
                "gateway: deciding call %s again failed; the next re-check asks again", relay.admission.call_id
            )
            return
        finally:
            relay.deciding = False
        if denial is not None:
            relay.cut(denial)


_watches: dict[asyncio.AbstractEventLoop, Watch] = {}


def watch() -> Watch:
    """This event loop's watcher (a process has one loop under an ASGI server)."""
    loop = asyncio.get_running_loop()
    found = _watches.get(loop)
    if found is None:
        for other in [each for each in _watches if each.is_closed()]:
            del _watches[other]
        found = _watches[loop] = Watch()
    return found
