"""The step journal: what each step of a task returned or raised, keyed by (task, seq).

This is the hot path of the runtime (one INSERT per step), so it is hand-written SQL
with a prepared statement; see runtime/sql/step_insert.sql for how the write is fenced.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from runtime import db
from runtime.encoding import decode
from runtime.errors import Fenced
from runtime.meter import meter
from runtime.states import StepKind


@dataclass(slots=True)
class Recorded:
    seq: int
    name: str
    kind: str
    output: Any  # decoded JSON
    error: dict | None


@dataclass(frozen=True, slots=True)
class JournalCall:
    """One Context call's place in the journal (runtime/worker/context.py _next): its
    seq, the name and kind the agent's code asked for, and what an earlier attempt
    recorded there, already checked to match them. `recorded` None: a new call, run now
    and journaled at `seq`; otherwise a replay, which runs nothing of the call again."""

    seq: int
    name: str
    kind: StepKind
    recorded: Recorded | None = None


T = TypeVar("T")


def replay_or_run(call: JournalCall, *, replay: Callable[[Recorded], T], run: Callable[[JournalCall], T]) -> T:
    """The one branch every journaled call takes (step, now, random, effect, model, tool,
    spawn, wait, sleep, approval): `replay(recorded)` when an earlier attempt journaled
    the call (it returns what was recorded, or raises the recorded error, or for a sleep
    or an approval goes on waiting), else `run(call)`, which does the work and journals it."""
    if call.recorded is not None:
        return replay(call.recorded)
    return run(call)


@db.reads("journal_load")
@dataclass(frozen=True, slots=True)
class _Row:
    seq: int
    name: str
    kind: str
    output: str | None  # jsonb, as text on this connection
    error: str | None


def load(task_id) -> list[Recorded]:
    """The journal in seq order. Seqs are dense from 0 because each attempt writes them
    in order and replays every earlier one first."""
    rows = db.fetchall("journal_load", {"task": task_id}, row=_Row)
    # Django's connection loads jsonb as text (it decodes JSON itself), so decode here.
    journal = [Recorded(r.seq, r.name, r.kind, decode(r.output), decode(r.error)) for r in rows]
    for expected, record in enumerate(journal):
        if record.seq != expected:
            raise RuntimeError(f"journal of task {task_id} has a gap before seq {record.seq}")
    return journal


def write(
    lease,
    *,
    seq: int,
    name: str,
    kind: str,
    output: str | None = None,
    error: dict | None = None,
    started: float | None = None,
    untrusted: bool = False,
) -> None:
    """Write one journal row for the attempt `lease` (runtime.attempts.lease.Lease): the
    output as JSON text, or the error record. `started` is time.monotonic() when the
    step began (the row's times come from the database's clock). Raise Fenced if the
    attempt no longer owns the task. `untrusted`: the output came from outside (a
    model's or a tool's reply), recorded as such (Step.untrusted)."""
    cur = db.execute(
        "step_insert",
        {
            "task": lease.task_id,
            "epoch": lease.epoch,
            "seq": seq,
            "name": name,
            "kind": kind,
            "output": output,
            "error": json.dumps(error) if error is not None else None,
            "untrusted": bool(untrusted),
            "took": 0.0 if started is None else max(0.0, time.monotonic() - started),
        },
    )
    if cur.rowcount != 1:
        raise _refusal(lease.task_id, lease.epoch, seq)
    db.after_commit(cur, lambda: meter.count("steps", tenant=lease.tenant))


@db.reads("task_epoch")
@dataclass(frozen=True, slots=True)
class _Now:
    epoch: int
    status: str


def _refusal(task_id, epoch: int, seq: int) -> BaseException:
    # Nothing was written: either a newer attempt (or a stop) moved the task on, or a
    # row for this seq already exists, which only a writer with our epoch could have
    # made and would be a bug in the executor.
    row = db.fetchone("task_epoch", {"task": task_id}, row=_Now)
    if row is None or row.epoch != epoch or row.status != "running":
        return Fenced(task_id, epoch, "journal")
    return RuntimeError(f"journal row {task_id}#{seq} already exists for the live epoch {epoch}")
