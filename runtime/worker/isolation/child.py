"""The entry point inside an isolated agent's sandbox (runtime/worker/isolation/sandbox.py
starts it as `python -I -S -B child.py`).

It imports only the standard library, runtime.errors and the agent's own module, never
Django: the sandbox holds nothing else, and a bare interpreter starts in tens of
milliseconds. It reads one `start` message, runs the agent with a RemoteContext, and
sends `done` or `failed`. Every ctx call is a `call` to the harness, which does it on
the real Context (fenced, journaled, replayed) and answers with a `reply`; code the
call must run here (a step's function, an effect's) is asked for with `run` and
answered with `result`. The child assigns no journal seq and writes nothing but frames:
the harness numbers every call and checks every message (harness.py).
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import sys
import types
import uuid
from collections import namedtuple
from datetime import UTC, datetime

from runtime import errors
from runtime.worker.isolation import protocol

# Exceptions the harness forwards by class name (a refusal agent code may catch, as in
# process); anything else arrives as RemoteFailure carrying the type's name.
_FORWARDED = {
    name: getattr(errors, name)
    for name in dir(errors)
    if isinstance(getattr(errors, name), type) and issubclass(getattr(errors, name), Exception)
}


class RemoteFailure(Exception):
    """A ctx call failed in the harness with an error that has no class here."""


class UntrustedText(str):
    """A model's reply, as in process (runtime.gateway.client.UntrustedText): data."""

    untrusted = True
    source: str
    receipt: dict


# Plain namedtuples, not typing's: the sandbox's start is timed, and typing costs ms.
class ChildResult(namedtuple("ChildResult", "task_id status output error")):
    __slots__ = ()

    @property
    def ok(self) -> bool:
        return self.status == "completed"


class ApprovalResult(namedtuple("ApprovalResult", "approval_id state decided_by comment reason")):
    __slots__ = ()

    @property
    def approved(self) -> bool:
        return self.state == "consumed"

    @property
    def expired(self) -> bool:
        return self.state == "expired"

    @property
    def denied(self) -> bool:
        return self.state in ("denied", "expired")

    @property
    def stale(self) -> bool:
        return self.state == "stale"


class Pipe:
    def __init__(self, read_fd: int, write_fd: int):
        self.reader = protocol.Reader(read_fd, limit=1 << 30)  # the harness is trusted
        self.write_fd = write_fd
        self._ids = 0

    def send(self, message: dict) -> None:
        protocol.write(self.write_fd, message)

    def call(self, method: str, args: dict, fns: dict | None = None):
        """One ctx call: send it, run what the harness asks of `fns` meanwhile, and
        return its reply (or raise its error)."""
        self._ids += 1
        call_id = self._ids
        self.send({"op": "call", "id": call_id, "method": method, "args": args})
        while True:
            message = self.reader.read_blocking()
            if message.get("op") == "run":
                self.send(_run(message, fns or {}))
                continue
            if message.get("op") == "reply" and message.get("id") == call_id:
                if "error" in message:
                    raise _error(message["error"], call_id)
                return message.get("ok")
            raise protocol.ProtocolViolation(f"unexpected message from the harness: {message.get('op')!r}")


def _run(message: dict, fns: dict) -> dict:
    fn = fns.get(message.get("fn"))
    cb = message.get("cb")
    if fn is None:
        return {"op": "result", "cb": cb, "error": {"type": "LookupError", "message": "no such function"}}
    try:
        value = fn(**message.get("kwargs", {}))
    except Exception as exc:
        return {"op": "result", "cb": cb, "error": _record(exc)}
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return {"op": "result", "cb": cb, "unencodable": f"{type(value).__name__}: {exc}"[:500]}
    return {"op": "result", "cb": cb, "ok": value}


def _record(exc: BaseException) -> dict:
    import traceback  # only on a failure: not at every sandbox's start

    return {
        "type": type(exc).__name__[:100],
        "message": str(exc)[:2000],
        "traceback": "".join(traceback.format_exception(exc, limit=8))[-4000:],
    }


def _error(record: dict, call_id: int) -> BaseException:
    cls = _FORWARDED.get(str(record.get("class")))
    exc: BaseException
    if cls is errors.StepFailed:
        exc = errors.StepFailed(record.get("step", ""), record.get("type", ""), record.get("message", ""))
    elif cls is not None:
        exc = cls.__new__(cls)
        Exception.__init__(exc, record.get("message", ""))
        for key, value in (record.get("fields") or {}).items():
            setattr(exc, key, value)
        if hasattr(exc, "message"):
            exc.message = record.get("message", "")
    elif record.get("class") in ("ValueError", "TypeError"):
        exc = {"ValueError": ValueError, "TypeError": TypeError}[record["class"]](record.get("message", ""))
    else:
        exc = RemoteFailure(f"{record.get('class')}: {record.get('message', '')}")
    exc._steward_call = call_id  # type: ignore[attr-defined]  # the harness re-raises its own on `failed`
    return exc


class RemoteContext:
    """What an isolated agent holds as `ctx`: the same methods as
    runtime.worker.context.Context, each a call to the harness."""

    def __init__(self, pipe: Pipe, identity: dict):
        self._pipe = pipe
        self.task_id = uuid.UUID(identity["task_id"])
        self.tenant = identity["tenant"]
        self.owner = identity["owner"]
        self.agent = identity["agent"]
        self.epoch = identity["epoch"]
        self.root_id = uuid.UUID(identity["root_id"]) if identity.get("root_id") else None
        self.parent_id = uuid.UUID(identity["parent_id"]) if identity.get("parent_id") else None
        self.attempt_reason = identity["attempt_reason"]
        self.isolated = True

    def step(self, name: str, fn, *args, **kwargs):
        return self._pipe.call("step", {"name": name}, {"fn": lambda: fn(*args, **kwargs)})

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._pipe.call("now", {}), tz=UTC)

    def random(self) -> float:
        return self._pipe.call("random", {})

    def effect(self, name, fn, *args, effect_class, key=None, keyed=False, requires=None, **kwargs):
        return self._pipe.call(
            "effect",
            {"name": name, "effect_class": effect_class, "key": key, "keyed": keyed, "requires": requires},
            {"fn": lambda idempotency_key: fn(*args, idempotency_key=idempotency_key, **kwargs)},
        )

    def authorize(self, action: str, resource: str) -> dict:
        return self._pipe.call("authorize", {"action": action, "resource": resource})

    def request_approval(
        self, action, *, effect_class, expires_in, precondition=None, requires=None, name="approval"
    ) -> ApprovalResult:
        spec = {"action": action, "effect_class": effect_class, "expires_in": expires_in}
        spec.update({"precondition": precondition, "requires": requires})
        return self.request_approvals([spec], name=name)[0]

    def request_approvals(self, requests, *, name="approvals") -> list[ApprovalResult]:
        # A callable precondition is read here, in the sandbox, on each ask: the harness
        # gets its value (it cannot call back into agent code for it).
        specs = []
        for request in requests:
            spec = dict(request)
            if callable(spec.get("precondition")):
                spec["precondition"] = spec["precondition"]()
            specs.append(spec)
        results = self._pipe.call("request_approvals", {"requests": specs, "name": name})
        return [ApprovalResult(**r) for r in results]

    def model(self, messages, *, model, stream=False, name=None, **params) -> UntrustedText:
        reply = self._pipe.call(
            "model", {"messages": messages, "model": model, "stream": stream, "name": name, "params": params}
        )
        text = UntrustedText(reply["text"])
        text.source, text.receipt = reply["source"], reply["receipt"]
        return text

    def tool(self, name, method, path, json=None, *, effect_class=None, step=None) -> dict:
        args = {"name": name, "method": method, "path": path, "json": json, "effect_class": effect_class, "step": step}
        return self._pipe.call("tool", args)

    def sleep(self, seconds: float) -> None:
        self._pipe.call("sleep", {"seconds": float(seconds)})

    def sleep_until(self, when: datetime) -> None:
        if when.tzinfo is None:
            raise ValueError("sleep_until needs an aware datetime")
        self._pipe.call("sleep_until", {"when": when.timestamp()})

    def spawn(self, agent: str, input: dict, *, scope=None) -> uuid.UUID:
        return uuid.UUID(self._pipe.call("spawn", {"agent": agent, "input": input, "scope": scope}))

    def wait(self, tasks) -> list[ChildResult]:
        return [ChildResult(**r) for r in self._pipe.call("wait", {"tasks": [str(t) for t in tasks]})]


def _agents_shim() -> types.ModuleType:
    """runtime.agents inside the sandbox: `@agent(...)` leaves the function as it is.
    The real module needs Django settings, which are not here (registration is the
    harness's business; the sandbox only runs the function)."""
    shim = types.ModuleType("runtime.agents")

    def agent(name, **options):
        return lambda fn: fn

    shim.agent = agent  # type: ignore[attr-defined]
    return shim


def _function(module_name: str, qualname: str):
    sys.modules.setdefault("runtime.agents", _agents_shim())
    target = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    target = getattr(target, "__wrapped__", target)
    if not callable(target):
        raise TypeError(f"{module_name}.{qualname} is not callable")
    return target


def main() -> None:
    # The protocol owns the original stdout; agent code's print() goes to stderr.
    out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    pipe = Pipe(0, out)
    start = pipe.reader.read_blocking()
    if start.get("op") != "start":
        raise protocol.ProtocolViolation("the first message is not `start`")
    sys.path[:0] = start["paths"]
    memory = start.get("memory_bytes")
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        fn = _function(start["module"], start["qualname"])
        output = fn(RemoteContext(pipe, start["identity"]), start["input"])
    except Exception as exc:
        pipe.send({"op": "failed", "error": _record(exc), "raised": getattr(exc, "_steward_call", None)})
        return
    try:
        pipe.send({"op": "done", "output": output})
    except (TypeError, ValueError) as exc:
        pipe.send({"op": "done", "unencodable": f"{type(output).__name__}: {exc}"[:500]})


if __name__ == "__main__":
    main()
