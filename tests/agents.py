"""Agents the tests run. Workers import this module (STEWARD_AGENT_MODULES) and so does
the test process (tests/conftest.py), so both sides know the same names."""

from __future__ import annotations

import os
import signal
import time

from console.dev.demo.fake_service import ServiceRejected, call
from runtime.agents import agent
from runtime.errors import EffectNotApplied


def submit(url: str, body: dict, *, idempotency_key: str, delay: float = 0.0) -> dict:
    """An outside call through the fake service; it tags the call with our pid."""
    try:
        return call(url, body, key=idempotency_key, worker=str(os.getpid()), delay=delay, timeout=60)
    except ServiceRejected as exc:
        raise EffectNotApplied(str(exc)) from exc


@agent("t.steps")
def steps(ctx, input):
    total = 0
    for i in range(input.get("n", 3)):
        total += ctx.step(f"s{i}", _identity, i)
    return {"total": total, "pid": ctx.step("pid", os.getpid)}


@agent("t.effect")
def effect(ctx, input):
    ctx.step("prepare", _identity, "ready")
    receipt = ctx.effect("submit", submit, input["url"], {"task": str(ctx.task_id)},
                         effect_class=input.get("effect_class", "reversible"), keyed=input.get("keyed", True))
    ctx.step("after", _identity, "done")
    return {"receipt": receipt}


@agent("t.busy")
def busy(ctx, input):
    """Holds its slot for `delay` seconds inside a call the fake service counts."""
    return ctx.step("work", call, input["url"], {"task": str(ctx.task_id)}, key=str(ctx.task_id),
                    delay=input.get("delay", 0.05), worker=str(os.getpid()))


@agent("t.sleeper")
def sleeper(ctx, input):
    before = ctx.step("before", os.getpid)
    ctx.sleep(input["seconds"])
    after = ctx.step("after", os.getpid)
    return {"before_pid": before, "after_pid": after}


@agent("t.child")
def child(ctx, input):
    value = ctx.step("double", _double, input["value"])
    if input.get("fail"):
        raise RuntimeError("child asked to fail")
    return {"value": value}


@agent("t.parent")
def parent(ctx, input):
    children = [ctx.spawn("t.child", {"value": v, "fail": v in input.get("fail", [])}) for v in input["values"]]
    results = ctx.wait(children)
    return {"results": [[r.status, r.output] for r in results]}


@agent("t.diverges")
def diverges(ctx, input):
    """Journals a different step name on its second attempt: replay must refuse it."""
    ctx.step("first-attempt" if ctx.epoch == 1 else "second-attempt", _identity, 1)
    ctx.sleep(input.get("seconds", 0.2))
    return {"done": True}


@agent("t.all_writes")
def all_writes(ctx, input):
    """One of each write an attempt makes: journal, child, effect and status."""
    ctx.step("one", _identity, 1)
    kid = ctx.spawn("t.child", {"value": 1})
    receipt = ctx.effect("submit", submit, input["url"], {"task": str(ctx.task_id)},
                         effect_class="reversible", keyed=True)
    return {"child": str(kid), "receipt": receipt}


def _identity(value):
    return value


def _double(value):
    return value * 2


# --- Agents for tests/integration/test_limits.py and test_children.py ----------------


@agent("t.nap_then_busy")
def nap_then_busy(ctx, input):
    """Sleeps durably (no slot held), then holds a slot for `delay` seconds inside a
    call the fake service counts: lets a test see how many run at once after a wake."""
    ctx.sleep(input["seconds"])
    return ctx.step("work", call, input["url"], {"task": str(ctx.task_id)}, key=str(ctx.task_id),
                    delay=input.get("delay", 0.05), worker=str(os.getpid()))


@agent("t.spawner")
def spawner(ctx, input):
    """Spawns each {"agent", "input"} in input["children"], waits for all of them and
    returns every ChildResult (a child may itself be a t.spawner: grandchildren)."""
    kids = [ctx.spawn(spec["agent"], spec["input"]) for spec in input["children"]]
    return {"results": [r.__dict__ for r in ctx.wait(kids)]}


@agent("t.crashes")
def crashes(ctx, input):
    """Kills its own worker process (SIGKILL) on every attempt, until an operator resumes
    it: a poison task, for dead-lettering."""
    ctx.step("before", _identity, 1)
    if ctx.attempt_reason != "resume":
        os.kill(os.getpid(), signal.SIGKILL)
    return {"survived": ctx.epoch}


@agent("t.paced")
def paced(ctx, input):
    """Steps of `pause` seconds around one keyed effect: long enough that a fault lands
    while many such tasks are mid-step, mid-call or ending."""
    for i in range(input.get("steps", 2)):
        ctx.step(f"before{i}", time.sleep, input["pause"])
    receipt = ctx.effect("submit", submit, input["url"], {"task": str(ctx.task_id)},
                         effect_class="reversible", keyed=True)
    for i in range(input.get("steps", 2)):
        ctx.step(f"after{i}", time.sleep, input["pause"])
    return {"receipt": receipt}


@agent("t.model")
def model_caller(ctx, input):
    """Asks the model through the credential gateway (ctx.model), then a tool (ctx.tool)."""
    text = ctx.model([{"role": "user", "content": input.get("prompt", "hello")}], model=input.get("model", "fake-1"),
                     stream=input.get("stream", False))
    out = {"text": str(text), "untrusted": text.untrusted, "source": text.source, "call": text.receipt["call"]}
    if input.get("tool"):
        answer = ctx.tool("echo", "POST", "notes/today", json={"text": str(text)})
        out["tool"] = {"status": answer["status"], "untrusted": answer["untrusted"], "body": answer["body"]}
    ctx.step("after", _identity, "done")
    return out


@agent("t.model_nap")
def model_nap(ctx, input):
    """A model call, a durable sleep (the attempt ends), then another model call: the
    resumed attempt's call is decided on the authority that holds then."""
    first = ctx.model([{"role": "user", "content": "before"}], model="fake-1")
    ctx.sleep(input.get("seconds", 1.0))
    second = ctx.model([{"role": "user", "content": "after"}], model="fake-1")
    return {"first": str(first), "second": str(second)}
