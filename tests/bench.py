"""`make bench`: Steward's throughput and latency on this machine, as one JSON object.

Every figure comes from the same run against the same PostgreSQL, in a fresh database
(steward_bench) so runs compare. Workers are real `celery worker --pool=solo`
processes. Progress and details go to stderr; stdout carries only the JSON.

    raw_insert_per_s       single-row INSERTs on one connection: the floor for a journal write
    steps_per_s            one task of 2,000 trivial steps, fenced, on one worker
    fleet_tasks_per_s      500 tasks of 5 steps, submitted one by one, on 2 worker processes
    dispatch_ms_p50/p99    submit() call to the first step's start, on an idle fleet
    worker_rss_growth_pct  a worker's RSS after 10,000 more steps, against after warm-up
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from urllib.parse import urlsplit, urlunsplit

BENCH_DB = "steward_bench"
POOL = "bench"


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def use_bench_database() -> str:
    """Recreate steward_bench next to DATABASE_URL's database and point Django at it."""
    import psycopg

    url = os.environ["DATABASE_URL"]
    parts = urlsplit(url)
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    bench_url = urlunsplit(parts._replace(path=f"/{BENCH_DB}"))
    os.environ["DATABASE_URL"] = bench_url
    return bench_url


def raw_insert_per_s(n: int = 5000) -> float:
    import psycopg

    with psycopg.connect(_psycopg_url(), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_raw (id bigserial PRIMARY KEY, v integer)")
        rates = []
        for _ in range(3):
            started = time.perf_counter()
            for i in range(n):
                conn.execute("INSERT INTO bench_raw (v) VALUES (%s)", (i,))
            rates.append(n / (time.perf_counter() - started))
        return statistics.median(rates)


def _psycopg_url() -> str:
    return os.environ["DATABASE_URL"]


def submit(agent: str, payload: dict):
    from runtime.submission import task_submit

    return task_submit(agent=agent, input=payload, tenant="bench", owner="bench", actor="bench",
                       pool=POOL).task_id


def wait_done(task_ids, timeout: float = 300.0) -> None:
    """Wait until every task finished. Completion times come from the database, so how
    often this polls changes no figure; it polls gently so as not to load the server it
    is measuring (a query over hundreds of ids every few ms costs real CPU)."""
    from runtime.models import Task

    pending = set(task_ids)
    deadline = time.monotonic() + timeout
    pause = 0.002 if len(pending) == 1 else 0.05
    while pending:
        done = set(Task.objects.filter(id__in=pending, status__in=["completed", "failed"]).values_list("id", flat=True))
        pending -= done
        if pending and time.monotonic() > deadline:
            raise SystemExit(f"bench: {len(pending)} tasks did not finish in {timeout}s")
        if pending:
            time.sleep(pause)


def steps_per_s(n: int = 2000) -> float:
    from django.db.models import Max, Min

    from runtime.models import Step

    rates = []
    for _ in range(3):
        task_id = submit("t.steps", {"n": n})
        wait_done([task_id])
        span = Step.objects.filter(task_id=task_id, name__startswith="s").aggregate(a=Min("started_at"), b=Max("finished_at"))
        rates.append(n / (span["b"] - span["a"]).total_seconds())
    return statistics.median(rates)


def fleet_tasks_per_s(n: int = 500, runs: int = 3) -> float:
    """Median of `runs`: from the first submit to the last task's finish. The submits
    come one by one from this process while the two workers drain the pool."""
    from django.db.models import Max

    from runtime.models import Task

    rates = []
    for _ in range(runs):
        started = time.time()
        ids = [submit("t.steps", {"n": 5}) for _ in range(n)]
        wait_done(ids)
        finished = Task.objects.filter(id__in=ids).aggregate(b=Max("finished_at"))["b"].timestamp()
        failed = Task.objects.filter(id__in=ids).exclude(status="completed").count()
        if failed:
            raise SystemExit(f"bench: {failed} fleet tasks did not complete")
        rates.append(n / (finished - started))
    log(f"fleet runs: {[round(r) for r in rates]}")
    return statistics.median(rates)


def dispatch_ms(n: int = 200) -> tuple[float, float]:
    from runtime.models import Step

    samples = []
    for _ in range(n):
        submitted = time.time()
        task_id = submit("t.steps", {"n": 1})
        wait_done([task_id])
        first = Step.objects.get(task_id=task_id, seq=0).started_at.timestamp()
        samples.append((first - submitted) * 1000)
    samples.sort()
    log(f"dispatch ms: min {samples[0]:.2f} max {samples[-1]:.2f}")
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def rss_growth_pct(worker, steps: int = 10_000) -> float:
    per_task = 2000
    wait_done([submit("t.steps", {"n": per_task}) for _ in range(2)])  # warm up
    before = worker.rss()
    for _ in range(steps // per_task):
        wait_done([submit("t.steps", {"n": per_task})])
    after = worker.rss()
    log(f"worker rss {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB")
    return (after - before) / before * 100


def main() -> None:
    bench_url = use_bench_database()
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("STEWARD_LOG_LEVEL", "WARNING")
    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    import tests.agents  # noqa: F401 - the bench runs the test agents
    from runtime.pools import pool_create
    from tests.harness import Fleet

    call_command("migrate", verbosity=0)
    pool_create(name=POOL, actor="bench", max_running=8, max_queued=100_000)
    queue = f"steward-bench-{os.getpid()}"
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    env = dict(os.environ, DATABASE_URL=bench_url, STEWARD_QUEUE=queue,
               STEWARD_AGENT_MODULES="runtime.demo.agents,tests.agents", STEWARD_LOG_LEVEL="WARNING")
    fleet = Fleet(env)
    try:
        log("raw inserts")
        raw = raw_insert_per_s()
        # One worker for the single-task figures, so nothing else competes for the CPU.
        (first,) = fleet.workers(1)
        log("steps")
        steps = steps_per_s()
        log("rss")
        rss = rss_growth_pct(first)
        fleet.workers(1)
        log("dispatch")
        p50, p99 = dispatch_ms()
        log("fleet")
        fleet_rate = fleet_tasks_per_s()
    finally:
        fleet.stop_all()
    result = {
        "raw_insert_per_s": round(raw),
        "steps_per_s": round(steps),
        "fleet_tasks_per_s": round(fleet_rate, 1),
        "dispatch_ms_p50": round(p50, 2),
        "dispatch_ms_p99": round(p99, 2),
        "worker_rss_growth_pct": round(rss, 2),
    }
    log(f"steps/raw = {steps / raw:.2f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
