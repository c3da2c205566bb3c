"""The runtime-neutral handoff harness (issue 24, docs/handoff.md).

It owns everything a runtime under test does not: the fake external service that records
operation keys (console/dev/demo/fake_service.py, real loopback HTTP), the injection
points, the seeded order of what is injected, the trace, and the verdicts.

A verdict is computed here from two sources only: the fake service's own record of the
calls it received, and the runtime's own store read by this harness with plain SQL (a
`StoreReader`: Steward's tables, DBOS's system tables). Nothing an adapter returns is
evidence; what it reports goes into the trace as `observe` lines and nowhere else.

A runtime joins by implementing `Adapter` (below) and a `StoreReader` over its store.
"""

from __future__ import annotations

import json
import platform
import random
import subprocess
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Protocol

REPO = Path(__file__).resolve().parents[2]

HOLD, FAIL, NA, NOT_RUN = "hold", "fail", "n/a", "not run"

# The published event orders (docs/handoff.md copies them from here). Each fixture injects
# exactly these steps, in this order; the seed only draws the values named in `draws`.
ORDERS: dict[str, list[str]] = {
    "resume_once": [
        "configure a queue: 1 running slot, bound of 1 waiting",
        "start task A: one keyed action on the fake service, which performs it and holds the reply",
        "cut the process running A (SIGKILL) before the result is saved",
        "submit task B (waits) and task C (beyond the bound)",
        "start two recoverers at once (two supervisors)",
        "release the held reply (to the dead process)",
        "wait for A and B to end; read the service's records and the store",
    ],
    "delegate_less": [
        "grant the owner write on repo:acme/*; start a permitted task that persists and sleeps",
        "mint or note the task's token (the old token)",
        "narrow the owner's grant to repo:acme/docs (authority now excludes the action)",
        "the task resumes and attempts the old action",
        "replay the old token to the credential gateway",
        "streaming: start a streamed call, narrow mid-stream; then the next call",
        "hostile tool text crosses the same handoff, asking for a grant",
    ],
    "stop_for_good": [
        "for each race, for each trial: start the work, wait the seeded offset, cancel",
        "races: child_spawn, completion_write, reused_id, supervisor_restart, timer",
        "after the cancel returns: let every process run on, then read the store and the service",
        "then a deliberate new attempt (resume or fork) of one cancelled run",
    ],
}
RACES = ("child_spawn", "completion_write", "reused_id", "supervisor_restart", "timer")

# One row per fixture and clause in the published table.
CLAUSES: dict[str, list[str]] = {
    "resume_once": ["one_effect_per_key", "no_lost_slot", "queue_bound_held", "active_requests_recorded"],
    "delegate_less": [
        "old_action_denied_by_current_authority",
        "old_token_replay_refused",
        "streaming_judged_apart",
        "attribution_not_from_content",
        "names_enforcing_boundary",
        "hostile_text_no_authorization",
    ],
    "stop_for_good": [
        *(f"{race}:cancel_not_overwritten" for race in RACES),
        *(f"{race}:no_fresh_work_after_stop" for race in RACES),
        "started_effects_recorded_apart",
        "new_attempt_distinguishable",
        "acknowledgments",
    ],
}


class Adapter(Protocol):
    """What a runtime gives the harness. Every method acts; none judges.

    Runs are named by the harness-visible id the runtime's store keys them by (Steward's
    task id, DBOS's workflow id). `point` names where a cut lands; the fixtures use
    "after_call" (the action performed, its result not saved)."""

    name: str

    def start(self, kind: str, params: dict) -> str:
        """Start one run of `kind` ("act", "sleep_then_act", "spawn", "paced", "timer") and
        return its id. params carry the fake service's URL and the operation key's stem."""
        ...

    def cut(self, run: str, point: str, how: str = "kill") -> None:
        """Kill (SIGKILL) or freeze (SIGSTOP) the OS process running `run` at `point`."""
        ...

    def replace(self, supervisors: int = 1) -> None:
        """Start `supervisors` recoverers at once (a replacement worker and supervisors)."""
        ...

    def narrow(self, actor: str, resource: str) -> None:
        """Narrow `actor`'s authority to `resource`."""
        ...

    def cancel(self, run: str) -> None:
        """Cancel `run`; returns once the runtime's cancel call returns."""
        ...

    def observe(self, run: str) -> list[dict]:
        """What the runtime says about `run`: trace lines, never evidence."""
        ...

    def close(self) -> None: ...


class StoreReader(Protocol):
    """The harness's own read of a runtime's store (SQL it runs itself)."""

    def status(self, run: str) -> str | None: ...

    def attempts(self, run: str) -> list[dict]: ...

    def children(self, run: str) -> list[dict]: ...


@dataclass
class Verdict:
    fixture: str
    clause: str
    runtime: str
    verdict: str
    reason: str
    evidence: dict = field(default_factory=dict)


def versions() -> dict:
    """The pinned versions of everything a run involves."""

    def pkg(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {
        "python": platform.python_version(),
        "steward_commit": commit,
        "dbos": pkg("dbos"),
        "celery": pkg("celery"),
        "django": pkg("django"),
        "psycopg": pkg("psycopg"),
    }


class Order:
    """The seeded draws of one fixture run: the same seed gives the same draws, in the
    same order, so two runs inject the same events at the same offsets."""

    def __init__(self, fixture: str, seed: int):
        self.fixture = fixture
        self.seed = seed
        self._rng = random.Random(f"{fixture}:{seed}")

    def offset(self, low: float, high: float) -> float:
        return round(self._rng.uniform(low, high), 3)

    def choice(self, options):
        return self._rng.choice(list(options))


class Trace:
    """One JSON-lines trace file per fixture run and runtime.

    Lines: {"kind": "header"} (fixture, runtime, seed, versions, the published order),
    {"kind": "inject"} (seq, step, params: the injected order), {"kind": "observe"} (one
    event, with actor, parent_run, child_run, attempt and policy_version as their own
    fields, None where the runtime has no such thing), {"kind": "verdict"}."""

    def __init__(self, path: Path, *, fixture: str, runtime: str, seed: int, pinned: dict | None = None):
        self.path = path
        self.fixture, self.runtime, self.seed = fixture, runtime, seed
        self.lines: list[dict] = []
        self._seq = 0
        self._t0 = time.monotonic()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        self._write(
            {
                "kind": "header",
                "fixture": fixture,
                "runtime": runtime,
                "seed": seed,
                "versions": pinned if pinned is not None else versions(),
                "order": ORDERS[fixture],
            }
        )

    def _write(self, line: dict) -> None:
        self.lines.append(line)
        with self.path.open("a") as out:
            out.write(json.dumps(line, sort_keys=True, default=str) + "\n")

    def inject(self, step: str, **params) -> None:
        self._seq += 1
        self._write({"kind": "inject", "seq": self._seq, "step": step, "params": params})

    def observe(
        self,
        event: str,
        *,
        source: str,
        actor: str | None = None,
        parent_run: str | None = None,
        child_run: str | None = None,
        attempt: int | None = None,
        policy_version: str | None = None,
        **detail,
    ) -> None:
        self._write(
            {
                "kind": "observe",
                "t": round(time.monotonic() - self._t0, 3),
                "event": event,
                "source": source,
                "actor": actor,
                "parent_run": parent_run,
                "child_run": child_run,
                "attempt": attempt,
                "policy_version": policy_version,
                "detail": detail,
            }
        )

    def verdict(self, v: Verdict) -> Verdict:
        self._write({"kind": "verdict", **asdict(v), "seed": self.seed, "trace": self.path.name})
        return v

    def injected(self) -> list[tuple]:
        """The injected order, as compared across runs (no timings in it)."""
        return [
            (line["seq"], line["step"], json.dumps(line["params"], sort_keys=True))
            for line in self.lines
            if line["kind"] == "inject"
        ]


def read_trace(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- The verdicts: functions of the service's records and the store's rows ----------------


def one_effect_per_key(calls: list[dict], keys: Iterable[str]) -> tuple[str, str, dict]:
    """calls: the fake service's own records. Each key must be performed exactly once."""
    performed: dict[str, int] = {}
    for call in calls:
        if call.get("outcome") == "performed":
            performed[call["key"]] = performed.get(call["key"], 0) + 1
    wanted = {key: performed.get(key, 0) for key in keys}
    more = {k: n for k, n in performed.items() if n > 1}
    evidence = {"performed_by_key": performed, "calls": len(calls)}
    if more:
        return FAIL, f"a key was performed more than once: {more}", evidence
    missing = [k for k, n in wanted.items() if n != 1]
    if missing:
        return FAIL, f"a key was never performed: {missing}", evidence
    return HOLD, "each operation key performed exactly once at the service", evidence


def after_stop(calls: list[dict], stop_at: float, started_keys: set[str]) -> list[dict]:
    """Calls the service received after the stop boundary whose key was not already
    started before it: fresh authorized work after the stop."""
    return [c for c in calls if c["at"] > stop_at and c.get("key") not in started_keys]


def judge(trace: Trace, fixture: str, clause: str, runtime: str, outcome: tuple[str, str, dict]) -> Verdict:
    verdict, reason, evidence = outcome
    return trace.verdict(Verdict(fixture, clause, runtime, verdict, reason, evidence))
