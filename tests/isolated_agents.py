"""Agents the isolated-mode tests run in a sandbox (`isolation="process"`).

This module is all the sandbox holds of the tests: it imports only the standard library
and runtime.agents (a stand-in inside the sandbox, runtime/worker/isolation/child.py) and
runtime.errors. Whatever it learns it returns, so the tests read it from the task's output.
"""

from __future__ import annotations

import json
import os
import time

from runtime.agents import agent
from runtime.errors import StepFailed


def _nonce(idempotency_key=None):
    """A value only this run of the function could have made: a second run differs."""
    return {"nonce": os.urandom(8).hex(), "key": idempotency_key}


def both(name: str):
    """Register the agent twice: `name` isolated, `name.inprocess` as in-process code, so
    that a test can run the same code either way (isolation in (None, "process"))."""

    def register(fn):
        agent(name, isolation="process")(fn)
        agent(f"{name}.inprocess")(fn)
        return fn

    return register


def named(name: str, isolation) -> str:
    return name if isolation == "process" else f"{name}.inprocess"


@both("iso.steps")
def steps(ctx, input):
    """A step, the clock, a random draw, an effect, a durable sleep, then more: the second
    attempt replays the first's calls from the journal."""
    first = ctx.step("first", lambda: {"n": input.get("n", 1)})
    now = ctx.now().timestamp()
    draw = ctx.random()
    sent = ctx.effect("send", _nonce, effect_class="irreversible")
    if input.get("nap"):
        ctx.sleep(input["nap"])
    try:
        ctx.step("fails", lambda: 1 / 0)
    except StepFailed as exc:
        caught = exc.error_type
    last = ctx.step("last", lambda: first["n"] + 1)
    return {"first": first, "now": now, "draw": draw, "sent": sent, "caught": caught, "last": last, "epoch": ctx.epoch}


@both("iso.approve")
def approve(ctx, input):
    """Asks a person, then acts on the answer once."""
    result = ctx.request_approval({"pay": input.get("amount", 5)}, effect_class="irreversible", expires_in=3600)
    if result.approved:
        return {"state": result.state, "paid": ctx.effect("pay", _nonce, effect_class="irreversible")}
    return {"state": result.state}


@both("iso.spin")
def spin(ctx, input):
    """One step, then a step that runs until stopped."""
    ctx.step("begin", lambda: 1)
    return ctx.step("spin", _spin)


def _spin():
    while True:
        time.sleep(0.05)


@both("iso.crash")
def crash(ctx, input):
    """An effect, then a step that never returns on the first attempt: the test kills the
    worker there, and the recovered attempt must replay the effect, not send it again."""
    ctx.step("prepare", lambda: 1)
    sent = ctx.effect("send", _nonce, effect_class="irreversible")
    ctx.step("hold", _hold, ctx.epoch)
    return {"sent": sent, "epoch": ctx.epoch}


def _hold(epoch):
    while epoch == 1:
        time.sleep(0.05)
    return epoch


# --- a hostile agent (tests/runtime/isolation/test_hostile.py) -----------------------------------


@agent("iso.hostile", isolation="process")
def hostile(ctx, input):
    """Tries one thing it should not be able to do, and reports what happened."""
    ctx.step("before", lambda: 1)
    try:
        return {"got": PROBES[input["probe"]](ctx, input.get("arg"))}
    except Exception as exc:
        return {"refused": f"{type(exc).__name__}: {exc}"[:300]}


def _read(ctx, path):
    with open(path, "rb") as f:
        return f.read(4096).decode("utf-8", "replace").replace("\0", "\n")


def _environs(ctx, arg):
    """Every environment this sandbox can read: its own and any process's in its /proc."""
    seen = [json.dumps(dict(os.environ))]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                seen.append(_read(ctx, f"/proc/{entry}/environ"))
            except OSError:
                pass
    try:
        seen.append(_read(ctx, f"/proc/{os.getppid()}/environ"))
    except OSError:
        pass
    return "\n".join(seen)


def _processes(ctx, arg):
    """The processes this sandbox can see, with their command lines."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                found[entry] = _read(ctx, f"/proc/{entry}/cmdline").replace("\0", " ")
            except OSError:
                found[entry] = "?"
    return found


def _connect(ctx, address):
    import socket

    host, port = address
    with socket.create_connection((host, port), timeout=2):
        return "connected"


def _write(ctx, path):
    with open(path, "w") as f:
        f.write("written by an isolated agent")
    return "written"


def _status(ctx, arg):
    fields = dict(line.split(":\t", 1) for line in _read(ctx, "/proc/self/status").splitlines() if ":\t" in line)
    return {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "CapEff": fields["CapEff"].strip(),
        "CapPrm": fields["CapPrm"].strip(),
    }


def _mint(ctx, arg):
    """Sign a capability token as the worker would: with its key and its minting code."""
    key = os.environ.get("STEWARD_CAPABILITY_KEY")
    from runtime.authz import tokens  # not in the sandbox

    return tokens.token_mint(key=key)


def _frame(ctx, raw):
    """Write bytes straight onto the pipe to the harness, past RemoteContext."""
    import struct

    pipe = ctx._pipe
    if raw == "giant":
        data = struct.pack(">I", 2**31) + b"{" * 1024
    elif raw == "malformed":
        data = struct.pack(">I", 9) + b"\xff\xfenot json"
    elif raw == "truncated_then_exit":
        os.write(pipe.write_fd, struct.pack(">I", 100) + b"{}")
        os._exit(0)
    else:
        body = raw if isinstance(raw, str) else json.dumps(raw)
        data = struct.pack(">I", len(body.encode())) + body.encode()
    os.write(pipe.write_fd, data)
    return pipe.reader.read_blocking()


PROBES = {
    "environ": _environs,
    "processes": _processes,
    "read": _read,
    "connect": _connect,
    "write": _write,
    "status": _status,
    "mint": _mint,
    "frame": _frame,
}


# --- the bench (tests/bench_isolated.py) ----------------------------------------------------


@both("iso.bench")
def bench(ctx, input):
    """input["steps"] trivial steps: the bench times them in process and isolated."""
    for i in range(input.get("steps", 0)):
        ctx.step(f"s{i}", int, i)
    return {"n": input.get("steps", 0)}
