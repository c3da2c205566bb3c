"""A framework's tool calls that need a person's approval, asked through ctx.request_approvals
(StewardAgent's and StewardRunner's), ending as the approvals contract says: approved, the
call runs; denied or expired (expiry means deny), it does not; stale (something the package
was bound to changed before it was acted on), a fresh approval is asked, under another
name, for the stale calls only.

A person may keep a package stale (a grant that keeps changing under it), so the calls
are asked at most ASKS times; still stale then, the call is refused like a denial. Each
ask is journaled, so a replay reads the same decisions and asks nobody again.
"""

from __future__ import annotations

from typing import Any

ASKS = 3


async def decide(bridge, ctx, specs: list[dict], name: str) -> list[Any]:
    """One ApprovalResult per spec, in order: the last decision each call got."""
    results = list(await bridge.call(ctx.request_approvals, specs, name=name[:200]))
    for ask in range(2, ASKS + 1):
        stale = [i for i, result in enumerate(results) if result.stale]
        if not stale:
            break
        again = await bridge.call(ctx.request_approvals, [specs[i] for i in stale], name=f"{name[:190]}-{ask}")
        for i, result in zip(stale, again, strict=True):
            results[i] = result
    return results


def refusal(result) -> str:
    """What the model is told in the place of a call a person did not approve."""
    why = (
        "expired"
        if result.expired
        else "went stale (something it depended on changed) each time it was asked"
        if result.stale
        else "was denied"
    )
    said = f": {result.comment}" if result.comment else ""
    return f"A person's approval of this call {why}{said}. It was not run."
