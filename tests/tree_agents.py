"""Agents for the tree pause tests (runtime/limits/pauses.py; tests/runtime/test_tree_pause.py,
tests/runtime/test_tree_pause_race.py, tests/integration/test_tree_pause.py,
tests/e2e/test_pause_tree.py). tests/agents.py imports this module, so the workers and the
test process know these names too."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from runtime.agents import agent

# In-process tests hold a sapling's step open here until the test lets it go.
GATES: dict[str, threading.Event] = {}


@agent("t.grove")
def grove(ctx, input):
    """The root of a tree to pause: input["saplings"] t.sapling children (each
    input["steps"] paced steps), optionally a t.napper (a durable sleep of input["nap"]
    seconds), and a t.bramble that trips its fan-out breaker; then waits for them all."""
    kids = [
        ctx.spawn(
            "t.sapling",
            {
                "steps": input["steps"],
                "pace": input.get("pace", 0.0),
                "dir": input.get("dir"),
                "name": f"sapling{i}",
                "gate": input.get("gate"),
            },
        )
        for i in range(input["saplings"])
    ]
    if "nap" in input:
        kids.append(ctx.spawn("t.napper", {"nap": input["nap"]}))
    kids.append(ctx.spawn("t.bramble", {"n": input.get("bramble", 2), "after": input.get("bramble_after", 0.0)}))
    return {"statuses": [r.status for r in ctx.wait(kids)]}


@agent("t.sapling")
def sapling(ctx, input):
    """input["steps"] steps, each input["pace"] seconds long; each appends its number to
    the file input["dir"]/input["name"] when it runs (a replayed step does not), so a test
    can count how often each step really ran. input["gate"]: the first step waits for the
    test to open GATES[gate] (in-process tests)."""
    for i in range(input["steps"]):
        ctx.step(f"s{i}", _paced, input, i)
    return {"steps": input["steps"]}


def _paced(input: dict, i: int) -> int:
    if i == 0 and input.get("gate"):
        GATES[input["gate"]].wait(10)
    time.sleep(input["pace"])
    if input.get("dir"):
        with open(Path(input["dir"]) / input["name"], "a") as marks:
            marks.write(f"{i}\n")
    return i


@agent("t.napper")
def napper(ctx, input):
    ctx.sleep(input["nap"])
    return {"woke": ctx.step("woke", time.time) > 0}


@agent("t.bramble", breakers={"max_children": 1})
def bramble(ctx, input):
    """After a step of input["after"] seconds, spawns input["n"] t.child tasks: past its
    one child it trips, which pauses the whole tree."""
    ctx.step("grow", time.sleep, input["after"])
    kids = [ctx.spawn("t.child", {"value": i}) for i in range(input["n"])]
    return {"values": [r.output["value"] for r in ctx.wait(kids)]}
