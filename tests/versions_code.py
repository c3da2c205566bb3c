"""The code of the versions tests' agents (docs/adr/0037-agent-versions.md), registered by
tests/versions_agents.py (every version, one process), tests/versions_old.py and
tests/versions_new.py (one version each, for worker processes of one deploy)."""

from __future__ import annotations


def _value(name: str) -> str:
    return name


def reorder_v1(ctx, input):
    """Old code: a, then sleep, then b."""
    a = ctx.step("a", _value, "a")
    ctx.sleep(input.get("sleep", 60))
    b = ctx.step("b", _value, "b")
    return {"version": "1", "order": [a, b]}


def reorder_v2(ctx, input):
    """New code, its steps reordered: b, then sleep, then a. An old task's journal
    (a, sleep) does not replay on it."""
    b = ctx.step("b", _value, "b")
    ctx.sleep(input.get("sleep", 60))
    a = ctx.step("a", _value, "a")
    return {"version": "2", "order": [b, a]}


def reorder_v3(ctx, input):
    """A compatible change of v1: the same first steps, one more at the end. An old
    task's journal replays on it, so an upgrade takes it there."""
    a = ctx.step("a", _value, "a")
    ctx.sleep(input.get("sleep", 60))
    b = ctx.step("b", _value, "b")
    c = ctx.step("c", _value, "c")
    return {"version": "3", "order": [a, b, c]}


def patched_before(ctx, input):
    """Before the patch: a, o1, o2, sleep, c."""
    out = [ctx.step("a", _value, "a"), ctx.step("o1", _value, "o1"), ctx.step("o2", _value, "o2")]
    ctx.sleep(input.get("sleep", 60))
    out.append(ctx.step("c", _value, "c"))
    return {"path": "old", "steps": out}


def patched_after(ctx, input):
    """The patch `x`: new tasks take x1, x2 where the old code took o1, o2; tasks already
    past that point keep the old path."""
    out = [ctx.step("a", _value, "a")]
    if ctx.patched("x"):
        path = "new"
        out += [ctx.step("x1", _value, "x1"), ctx.step("x2", _value, "x2")]
    else:
        path = "old"
        out += [ctx.step("o1", _value, "o1"), ctx.step("o2", _value, "o2")]
    ctx.sleep(input.get("sleep", 60))
    out.append(ctx.step("c", _value, "c"))
    return {"path": path, "steps": out}


def patched_deprecated(ctx, input):
    """The patch `x` deprecated: only the new path is left."""
    out = [ctx.step("a", _value, "a")]
    ctx.deprecate_patch("x")
    out += [ctx.step("x1", _value, "x1"), ctx.step("x2", _value, "x2")]
    ctx.sleep(input.get("sleep", 60))
    out.append(ctx.step("c", _value, "c"))
    return {"path": "new", "steps": out}
