"""The agent `make bench-dense` runs (tests/bench_dense.py): a long reasoning reply, then
one keyed effect. Imported by the bench's workers (STEWARD_AGENT_MODULES)."""

from __future__ import annotations

from runtime.agents import agent
from tests.agents import submit


@agent("t.dense")
def dense(ctx, input):
    """Stream a model reply through the credential gateway (the fake model sends it slowly:
    a minute at 5 chunks/s in the bench), then record it with one keyed effect on the
    fake service, which counts what it performed per key (a duplicate is a key done twice)."""
    reply = ctx.model([{"role": "user", "content": "think it through"}], model="fake-1", stream=True)
    receipt = ctx.effect(
        "record",
        submit,
        input["url"],
        {"task": str(ctx.task_id), "chars": len(reply)},
        effect_class="reversible",
        keyed=True,
    )
    return {"chars": len(reply), "op": receipt.get("op_id") if isinstance(receipt, dict) else None}
