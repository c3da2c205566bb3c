"""The worker's side of an isolated agent: start its sandbox, answer its ctx calls on the
real Context, and hand back its output (docs/adr/0036-isolated-agents.md).

The child is untrusted. Every frame it sends is read as hostile (protocol.py bounds its
size and checks it is a JSON object), and every message is checked here before anything
is done with it: its op, its fields and their types (SHAPES), and its place in the
conversation. The child may send a `call` only when nothing is outstanding, numbered
one past the last; a `result` only for the `run` the harness asked for; `done` or
`failed` only between calls. The child never names a journal seq: the real Context
numbers each call (_next), replays what is journaled, and fences every write by the
attempt's epoch, exactly as in process. Whatever the child sends out of turn, too big,
or malformed ends the attempt and fails the task (ISOLATION_PROTOCOL), and the sandbox
is killed; nothing of that message is written.

Ending the attempt works as in process: a sleep, a wait or an approval raises Suspend
out of the real Context, a stop raises StopRequested into this thread (the harness
waits on the pipe in short selects, in agent code's region, so a stop reaches it), and
the sandbox is killed on the way out. The next attempt starts a new sandbox, whose
agent code replays from the start: each call it makes is answered from the journal.
"""

from __future__ import annotations

import os
import select
import selectors
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from runtime import config
from runtime.errors import StewardError
from runtime.worker.isolation import protocol, sandbox

# How long one select waits: a stop raised into this thread (runtime/attempts/interrupts.py)
# lands between two of them.
POLL_SECONDS = 0.1
STDERR_TAIL = 4000
NAME = (str,)
OPTIONAL_STR = (str, type(None))
NUMBER = (int, float)
ANY = object
# What each ctx call may carry: field -> allowed types; nothing else is accepted.
SHAPES: dict[str, dict[str, Any]] = {
    "step": {"name": NAME},
    "now": {},
    "random": {},
    "effect": {
        "name": NAME,
        "effect_class": NAME,
        "key": OPTIONAL_STR,
        "keyed": (bool,),
        "requires": (list, type(None)),
    },
    "authorize": {"action": NAME, "resource": NAME},
    "request_approvals": {"requests": (list,), "name": NAME},
    "model": {"messages": (list,), "model": NAME, "stream": (bool,), "name": OPTIONAL_STR, "params": (dict,)},
    "tool": {
        "name": NAME,
        "method": NAME,
        "path": NAME,
        "json": ANY,
        "effect_class": OPTIONAL_STR,
        "step": OPTIONAL_STR,
    },
    "sleep": {"seconds": NUMBER},
    "sleep_until": {"when": NUMBER},
    "spawn": {"agent": NAME, "input": ANY, "scope": ANY},
    "wait": {"tasks": (list,)},
}
# The calls whose code runs in the sandbox, asked for with `run`.
CALLBACKS = {"step": "fn", "effect": "fn"}


class ProtocolBroken(BaseException):
    """The child broke the protocol while Steward's own code waited on it (inside a step
    or an effect). A BaseException so that no step journals it as the step's error and
    no effect records it as the service's answer; run() turns it into IsolationViolation."""


class IsolationViolation(StewardError):
    """The sandboxed agent broke the protocol (or its sandbox died): the task fails."""

    code = "ISOLATION_PROTOCOL"


class RemoteError(Exception):
    """An exception raised by agent code in the sandbox, inside a step's or an effect's
    function: journaled as that step's error, under the sandbox's type name."""


class Unencodable:
    """What the sandbox's function returned was not JSON: the real Context refuses to
    journal it (NotJournalable), as in process."""

    def __init__(self, what: str):
        self.what = what

    def __repr__(self) -> str:
        return f"<not JSON: {self.what}>"


def run(ctx, spec, input) -> Any:
    """Run the isolated agent `spec` for the attempt `ctx` (runtime.worker.context.Context)
    and return its output, or raise what the attempt ends with."""
    module = sys.modules[spec.fn.__module__]
    process, paths = sandbox.start(module)
    session = Session(ctx, process)
    try:
        return session.run(spec, input, paths)
    except ProtocolBroken as broken:
        raise IsolationViolation(str(broken), tail=session.stderr_tail()[-500:]) from None
    finally:
        session.close()


class Session:
    def __init__(self, ctx, process):
        self.ctx = ctx
        self.process = process
        self.reader = protocol.Reader(process.stdout.fileno(), limit=frame_limit())
        os.set_blocking(process.stdin.fileno(), False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(process.stdout, selectors.EVENT_READ, "out")
        self.selector.register(process.stderr, selectors.EVENT_READ, "err")
        self._stderr = bytearray()
        self.calls = 0  # the last call id the child used
        self.callbacks = 0
        self.forwarded: dict[int, BaseException] = {}
        self.started = time.monotonic()

    # --- the conversation ------------------------------------------------------------

    def run(self, spec, input, paths: list[str]) -> Any:
        ctx = self.ctx
        self.send(
            {
                "op": "start",
                "module": spec.fn.__module__,
                "qualname": spec.fn.__qualname__,
                "paths": paths,
                "input": input,
                "memory_bytes": sandbox.MEMORY_BYTES,
                "identity": {
                    "task_id": str(ctx.task_id),
                    "tenant": ctx.tenant,
                    "owner": ctx.owner,
                    "agent": ctx.agent,
                    "epoch": ctx.epoch,
                    "root_id": str(ctx.root_id) if ctx.root_id else None,
                    "parent_id": str(ctx.parent_id) if ctx.parent_id else None,
                    "attempt_reason": ctx.attempt_reason,
                },
            }
        )
        while True:
            message = self.receive()
            op = message.get("op")
            if op == "call":
                self.answer(message)
            elif op == "done":
                _fields(message, {"op": NAME, "output": ANY, "unencodable": (str,)}, required=("op",))
                if "unencodable" in message:
                    return Unencodable(message["unencodable"])
                return message.get("output")
            elif op == "failed":
                _fields(message, {"op": NAME, "error": (dict,), "raised": (int, type(None))}, required=("op", "error"))
                raised = self.forwarded.get(message.get("raised"))  # type: ignore[arg-type]
                if raised is not None:
                    raise raised  # the harness's own refusal, uncaught by agent code: fail as in process
                raise _remote(message["error"])
            else:
                raise ProtocolBroken(f"the sandbox sent {_op(op)} between calls")

    def answer(self, message: dict) -> None:
        _fields(
            message,
            {"op": NAME, "id": (int,), "method": NAME, "args": (dict,)},
            required=("op", "id", "method", "args"),
        )
        if message["id"] != self.calls + 1 or isinstance(message["id"], bool):
            raise ProtocolBroken(f"call {message['id']!r} out of order (expected {self.calls + 1})")
        self.calls = call_id = message["id"]
        method, args = message["method"], message["args"]
        shape = SHAPES.get(method)
        if shape is None:
            raise ProtocolBroken(f"no ctx call is named {method[:50]!r}")
        _fields(args, shape, required=tuple(shape))
        try:
            value = getattr(self, f"_{method}")(**args)
        except Exception as exc:  # an answer agent code may catch, as in process
            self.forwarded[call_id] = exc
            self.send({"op": "reply", "id": call_id, "error": _forward(exc)})
            return
        self.send({"op": "reply", "id": call_id, "ok": value})

    def callback(self, name: str, **kwargs) -> Any:
        """Ask the sandbox to run the current call's function; its `result` only."""
        self.callbacks += 1
        cb = self.callbacks
        self.send({"op": "run", "cb": cb, "call": self.calls, "fn": name, "kwargs": kwargs})
        message = self.receive()
        if message.get("op") != "result":
            raise ProtocolBroken(f"the sandbox sent {_op(message.get('op'))} while its function ran")
        _fields(
            message,
            {"op": NAME, "cb": (int,), "ok": ANY, "error": (dict,), "unencodable": (str,)},
            required=("op", "cb"),
        )
        if message["cb"] != cb:
            raise ProtocolBroken(f"result {message['cb']!r} answers no function the harness asked for")
        if "error" in message:
            raise _remote(message["error"])
        if "unencodable" in message:
            return Unencodable(message["unencodable"])
        return message.get("ok")

    # --- the ctx calls, each on the real Context --------------------------------------

    def _step(self, name):
        return self.ctx.step(name, lambda: self.callback("fn"))

    def _now(self):
        return self.ctx.now().timestamp()

    def _random(self):
        return self.ctx.random()

    def _effect(self, name, effect_class, key, keyed, requires):
        def fn(*, idempotency_key):
            return self.callback("fn", idempotency_key=idempotency_key)

        requires = tuple(requires) if requires is not None else None
        return self.ctx.effect(name, fn, effect_class=effect_class, key=key, keyed=keyed, requires=requires)

    def _authorize(self, action, resource):
        decision = self.ctx.authorize(action, resource)
        keep = ("allowed", "boundary", "reason_code", "policy_version", "authz_revision")
        return {"decision_id": str(decision.id), **{k: _plain(getattr(decision, k, None)) for k in keep}}

    def _request_approvals(self, requests, name):
        specs = [
            {**spec, "requires": tuple(spec["requires"])} if isinstance(spec, dict) and spec.get("requires") else spec
            for spec in requests
        ]
        return [r._asdict() for r in self.ctx.request_approvals(specs, name=name)]

    def _model(self, messages, model, stream, name, params):
        reply = self.ctx.model(messages, model=model, stream=stream, name=name, **params)
        return {"text": str(reply), "source": reply.source, "receipt": reply.receipt}

    def _tool(self, name, method, path, json, effect_class, step):
        return self.ctx.tool(name, method, path, json, effect_class=effect_class, step=step)

    def _sleep(self, seconds):
        self.ctx.sleep(seconds)

    def _sleep_until(self, when):
        self.ctx.sleep_until(datetime.fromtimestamp(when, tz=UTC))

    def _spawn(self, agent, input, scope):
        return str(self.ctx.spawn(agent, input, scope=scope))

    def _wait(self, tasks):
        return [
            {"task_id": str(r.task_id), "status": r.status, "output": r.output, "error": r.error}
            for r in self.ctx.wait([uuid.UUID(t) if isinstance(t, str) else t for t in tasks])
        ]

    # --- the pipe ----------------------------------------------------------------------

    def send(self, message: dict) -> None:
        """Write a whole frame. The pipe is non-blocking and each wait for room is a short
        select: a child that stops reading cannot hold this thread in a write a stop
        could not interrupt."""
        data = memoryview(protocol.pack(message))
        fd = self.process.stdin.fileno()
        while data:
            try:
                data = data[os.write(fd, data) :]
            except BlockingIOError:
                select.select([], [fd], [], POLL_SECONDS)
            except OSError:  # BrokenPipeError among them
                raise ProtocolBroken(f"the sandbox exited ({self._exit()})") from None

    def receive(self) -> dict:
        """The child's next message. Waits in short selects, so that a stop delivered into
        this thread is raised between two of them."""
        while True:
            try:
                message = self.reader.next()
            except protocol.ProtocolViolation as exc:
                raise ProtocolBroken(str(exc)) from None
            if message is not None:
                return message
            for key, _ in self.selector.select(POLL_SECONDS):
                if key.data == "err":
                    self._drain_stderr()
                    continue
                try:
                    self.reader.feed()
                except protocol.PeerGone:
                    raise ProtocolBroken(f"the sandbox exited ({self._exit()}): {self.stderr_tail()[-300:]}") from None
                except protocol.ProtocolViolation as exc:
                    raise ProtocolBroken(str(exc)) from None

    def _drain_stderr(self) -> None:
        chunk = os.read(self.process.stderr.fileno(), 1 << 16)
        if not chunk:
            self.selector.unregister(self.process.stderr)
            return
        self._stderr += chunk
        del self._stderr[:-STDERR_TAIL]

    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace")

    def _exit(self) -> str:
        try:
            code = self.process.wait(timeout=1)
        except Exception:
            return "still running"
        return f"exit status {code}"

    def close(self) -> None:
        """Kill the sandbox (bwrap's own child dies with it: --die-with-parent) and reap it."""
        self.selector.close()
        if self.process.poll() is None:
            self.process.kill()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except OSError:
                pass
        self.process.wait()


def frame_limit() -> int:
    """The largest frame the child may send: a step's output at its limit, with room for
    JSON's escapes and the message around it."""
    return 2 * config.max_output_bytes() + 65536


def _fields(message: dict, shape: dict[str, Any], *, required: tuple[str, ...]) -> None:
    unknown = set(message) - set(shape)
    if unknown:
        raise ProtocolBroken(f"unexpected fields {sorted(k[:50] for k in unknown)[:5]}")
    for key in required:
        if key not in message:
            raise ProtocolBroken(f"field {key!r} is missing")
    for key, value in message.items():
        allowed = shape[key]
        if allowed is ANY:
            continue
        if isinstance(value, bool) and bool not in allowed:
            raise ProtocolBroken(f"field {key!r} has the wrong type")
        if not isinstance(value, allowed):
            raise ProtocolBroken(f"field {key!r} has the wrong type")


def _op(op) -> str:
    return repr(op[:50]) if isinstance(op, str) else f"a message with op {type(op).__name__}"


def _remote(record: dict) -> RemoteError:
    """The sandbox's exception, under its own type name (validated: a class name, short)."""
    name = record.get("type")
    if not isinstance(name, str) or not name.isidentifier() or len(name) > 100:
        name = "RemoteError"
    message = record.get("message")
    cls = type(name, (RemoteError,), {"__module__": "sandbox"})
    return cls(message[:2000] if isinstance(message, str) else "")


def _forward(exc: Exception) -> dict:
    """What the child needs to raise the same refusal: its class name, message and fields."""
    fields = {k: _plain(v) for k, v in vars(exc).items() if not k.startswith("_") and k not in ("message",)}
    message = getattr(exc, "message", None)
    record: dict[str, Any] = {
        "class": type(exc).__name__,
        "message": str(message if isinstance(message, str) else exc)[:2000],
    }
    if "step" in fields:
        record.update(step=fields["step"], type=fields.get("error_type", ""))
    record["fields"] = fields
    return record


def _plain(value):
    """A JSON-safe copy of a refusal's field (details may hold UUIDs, datetimes)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)
