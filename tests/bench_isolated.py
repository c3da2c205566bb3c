"""The isolated mode's figures (docs/adr/0036-isolated-agents.md), for `make bench`:
one JSON object on stdout, progress on stderr. In its own database, in this process (the
worker loop of runtime/testing.py: the same executor a worker runs, without Celery).

    isolated_attempt_start_ms      p50 of an isolated attempt that makes no ctx call, from
                                   the sandbox's start to its output back and the sandbox
                                   reaped (bwrap, a bare interpreter, the pipe): what
                                   isolation adds to starting an attempt. Target <= 150.
    isolated_step_overhead_us      what one trivial journaled step costs isolated over in
                                   process: (per-step time isolated) - (per step in process),
                                   each from a 400-step task minus a 0-step one, median of 3
    isolated_step_ratio            per-step time isolated over in process, same run. Target <= 3.
    inprocess_step_us              the in-process per-step time it is measured against
    isolated_rss_mb_per_attempt    resident memory of one attempt's sandbox (its bwrap
                                   processes and interpreter), read while a step runs
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from types import SimpleNamespace

import tests.bench_role  # noqa: F401 - before anything reads DATABASE_URL
from tests.bench import log, use_bench_database

STARTS = 40
STEPS = 400
ROUNDS = 3


def _identity(**extra) -> SimpleNamespace:
    task = uuid.uuid4()
    return SimpleNamespace(
        task_id=task,
        tenant="acme",
        owner="user:bench",
        agent="iso.bench",
        epoch=1,
        root_id=task,
        parent_id=None,
        attempt_reason="first",
        **extra,
    )


def attempt_start_ms() -> float:
    """An attempt of iso.bench with no step: nothing but the sandbox's round trip."""
    from runtime import agents
    from runtime.worker.isolation import harness

    spec = agents.get("iso.bench")
    harness.run(_identity(), spec, {"steps": 0})  # the page cache warm, as on a busy worker
    times = []
    for _ in range(STARTS):
        started = time.perf_counter()
        output = harness.run(_identity(), spec, {"steps": 0})
        times.append((time.perf_counter() - started) * 1000)
        assert output == {"n": 0}, output
    return statistics.median(times)


def rss_mb_per_attempt() -> float:
    """Read while the sandbox waits inside its one step: every process under this one."""
    import psutil

    from runtime import agents
    from runtime.worker.isolation import harness

    seen = []

    def step(name, fn):
        rss = sum(child.memory_info().rss for child in psutil.Process().children(recursive=True))
        seen.append(rss / (1024 * 1024))
        return fn()

    for _ in range(5):
        harness.run(_identity(step=step), agents.get("iso.bench"), {"steps": 1})
    return statistics.median(seen)


def per_step_us(env, agent: str) -> float:
    """Per-step time of `agent`: a 400-step task's attempt minus a 0-step one's."""

    def attempt(steps: int) -> float:
        task = env.submit(agent, {"steps": steps})
        started = time.perf_counter()
        env.run_until_idle()
        took = time.perf_counter() - started
        assert env.result(task).status == "completed", env.result(task).error
        return took

    attempt(1)  # warm
    return (attempt(STEPS) - attempt(0)) / STEPS * 1e6


def main() -> None:
    # "test_": the worker loop of runtime/testing.py keeps to databases named so.
    use_bench_database("test_steward_bench_isolated")
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("STEWARD_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    import tests.agents  # noqa: F401 - registers tests/isolated_agents.py too
    from runtime.testing import StewardTestEnv

    call_command("migrate", verbosity=0)
    log("isolated attempt start")
    start = attempt_start_ms()
    log(f"isolated attempt start p50 {start:.1f} ms")
    log("isolated rss")
    rss = rss_mb_per_attempt()
    log(f"isolated rss {rss:.1f} MB")
    log("isolated step overhead")
    inprocess, isolated = [], []
    with StewardTestEnv(tenant="acme", owner="user:bench") as env:
        for _ in range(ROUNDS):  # alternating, so that load on the machine falls on both
            inprocess.append(per_step_us(env, "iso.bench.inprocess"))
            isolated.append(per_step_us(env, "iso.bench"))
    base, iso = statistics.median(inprocess), statistics.median(isolated)
    print(
        json.dumps(
            {
                "isolated_attempt_start_ms": round(start, 1),
                "isolated_step_overhead_us": round(iso - base, 1),
                "isolated_step_ratio": round(iso / base, 2),
                "inprocess_step_us": round(base, 1),
                "isolated_rss_mb_per_attempt": round(rss, 1),
            }
        )
    )


if __name__ == "__main__":
    sys.exit(main())
