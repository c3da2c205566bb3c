"""Fault injection points, for the fault tests (tests/faults/). Inert in production.

With STEWARD_FAULT_POINTS="after_effect_before_receipt@submit,between_steps" a worker
that reaches a listed point (optionally only at the named step) writes a marker file
into STEWARD_FAULT_DIR and then holds still, so the test can SIGKILL or SIGSTOP it at
exactly that point. Each (task, point, step) fires once across all processes (the
marker is created with a hard link, which fails if it exists), so the replacement
worker passes through. A test that wants the held worker to go on (to check that its
late writes are refused) creates "<marker>.release".

In-process, the public test harness (runtime/testing.py) crashes the attempt at a point
instead: it hands reach() a callable through intercept(), and that raises there. Only
code in the process can set it; no setting or environment variable does.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

BEFORE_EFFECT = "before_effect"  # before the intent is recorded
AFTER_EFFECT_BEFORE_RECEIPT = "after_effect_before_receipt"  # the service acted; no receipt yet
AFTER_RECEIPT_BEFORE_JOURNAL = "after_receipt_before_journal"
BETWEEN_STEPS = "between_steps"  # a step is journaled; the next not begun
BEFORE_STEP_JOURNAL = "before_step_journal"  # a step ran; its row is not written
BEFORE_STATUS = "before_status"  # the agent returned; status not written
BEFORE_SPAWN = "before_spawn"  # a child is about to be created
IN_EFFECT_INTENT = "in_effect_intent"  # inside the intent's transaction, task row held
BEFORE_CLAIM = "before_claim"  # a connection is in hand; the claim not sent
IN_SCHEDULE_FIRE = "in_schedule_fire"  # a tick moved on and its task submitted; not committed
BEFORE_STOP_LISTEN = "before_stop_listen"  # the stop watcher has not LISTENed yet
POINTS = (
    BEFORE_EFFECT,
    AFTER_EFFECT_BEFORE_RECEIPT,
    AFTER_RECEIPT_BEFORE_JOURNAL,
    BETWEEN_STEPS,
    BEFORE_STEP_JOURNAL,
    BEFORE_STATUS,
    BEFORE_SPAWN,
    IN_EFFECT_INTENT,
    BEFORE_CLAIM,
    IN_SCHEDULE_FIRE,
    BEFORE_STOP_LISTEN,
)


def _parse(raw: str) -> frozenset[tuple[str, str | None]]:
    wanted = set()
    for item in filter(None, (part.strip() for part in raw.split(","))):
        point, _, step = item.partition("@")
        if point not in POINTS:
            raise ValueError(f"unknown fault point {point!r} in STEWARD_FAULT_POINTS")
        wanted.add((point, step or None))
    return frozenset(wanted)


_WANTED = _parse(os.environ.get("STEWARD_FAULT_POINTS", ""))
_DIR = Path(os.environ.get("STEWARD_FAULT_DIR", "/tmp/steward-faults"))
_intercept: list[Callable[..., None]] = []  # at most one: runtime/testing.py's, while it runs


def intercept(fn: Callable[..., None] | None) -> None:
    """Call fn(point, task_id=, step=, epoch=) at every point reached, or stop (None)."""
    _intercept[:] = [fn] if fn is not None else []


def reach(point: str, *, task_id, step: str, epoch: int) -> None:
    for fn in _intercept:
        fn(point, task_id=task_id, step=step, epoch=epoch)
    if not _WANTED or ((point, step) not in _WANTED and (point, None) not in _WANTED):
        return
    marker = _DIR / f"{task_id}.{point}.{step}"
    scratch = _DIR / f".{marker.name}.{os.getpid()}"
    scratch.write_text(
        json.dumps({"pid": os.getpid(), "point": point, "step": step, "task": str(task_id), "epoch": epoch})
    )
    try:
        os.link(scratch, marker)
    except FileExistsError:
        return  # fired already, in this or another process
    finally:
        scratch.unlink()
    release = marker.with_name(marker.name + ".release")
    while not release.exists():  # held here until killed, frozen or released
        time.sleep(0.005)
