"""`make bench`: Steward's throughput and latency on this machine, as one JSON object.

Every figure comes from the same run against the same PostgreSQL, in a fresh database
(steward_bench) so runs compare. Workers are real `celery worker --pool=solo`
processes. Progress and details go to stderr; stdout carries only the JSON.

    raw_insert_per_s       single-row INSERTs on one connection: the floor for a journal write
    steps_per_s            one task of 2,000 trivial steps, fenced, on one worker
    fleet_tasks_per_s      500 tasks of 5 steps, submitted one by one, on 2 worker processes
    dispatch_ms_p50/p99    submit() call to the first step's start, on an idle fleet
    approval_resume_ms_p50/p99  approval_decide() call to the start of the approved step,
                           on the same idle fleet
    wake_burst_drain_per_s 1,000 tasks asleep on one shared wake time, drained through the
                           same pool (limit 8) on the same 2 workers as fleet_tasks_per_s,
                           5 steps each after the sleep; from the first woken attempt's
                           start to the last finish (median of 3); wake_burst_vs_fleet is its ratio to the
                           same run's fleet_tasks_per_s
    worker_rss_growth_pct  a worker's RSS after 10,000 more steps, against after warm-up
    submit_backlog_ratio   submits/s into a pool holding 50,000 queued tasks over submits/s
                           into an empty pool, alternating, in the same run (no workers)
    console_p95_ms         the slowest p95 of four console pages over 100,000 tasks and
                           1,000,000 audit events, through gunicorn (tests/bench_console.py,
                           in its own database; also console_pages_p95_ms, page by page)
    api_submit_ms_p50      POST /api/v1/tasks with a token over HTTP; api_submit_per_s from
                           four clients at once
    gateway_added_ms_p50/p99  what a credential gateway call adds over calling the fake
                           model directly, alternating, from one process (tests/bench_gateway.py,
                           in its own database; also gateway_direct_ms_p50)
    authorize_per_s        authorize() decisions per second on one connection
    stop_tree_ms_p50/p99   a 50-task tree stopped while other tasks run: from the stop's
                           request to the last boundary's acknowledgment, both as the
                           database recorded them (30 trees; p99 is then the slowest)

    isolated_attempt_start_ms, isolated_step_overhead_us, isolated_step_ratio,
    isolated_rss_mb_per_attempt  the isolated mode (`@agent(..., isolation="process")`):
                           a sandbox's start, what a trivial step costs over in process
                           and their ratio in the same run, a sandbox's memory
                           (tests/bench_isolated.py, in its own database)

    console_poll_load      dispatch_ms_p50 with 200 task pages open and polling over
                           dispatch_ms_p50 with none, in one run (tests/bench_poll.py;
                           target <= 1.1)

STEWARD_BENCH_ONLY=console_poll_load (or =isolated) runs only the figures it names.
STEWARD_BENCH_DB names the database (default steward_bench); it is dropped and made anew.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from urllib.parse import urlsplit, urlunsplit

import tests.bench_role  # noqa: F401 - before anything reads DATABASE_URL

BENCH_DB = os.environ.get("STEWARD_BENCH_DB", "steward_bench")
POOL = "bench"
# STEWARD_BENCH_ONLY=console_poll_load: only those figures (comma-separated), for a quick look.
ONLY = [name for name in os.environ.get("STEWARD_BENCH_ONLY", "").split(",") if name]


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


_BASE_URL = os.environ.get("DATABASE_URL", "")


def use_bench_database(name: str) -> str:
    """Recreate database `name` next to DATABASE_URL's database and point DATABASE_URL at it."""
    import psycopg

    parts = urlsplit(os.environ["DATABASE_URL"])
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    bench_url = urlunsplit(parts._replace(path=f"/{name}"))
    os.environ["DATABASE_URL"] = bench_url
    return bench_url


def bench_fleet(database: str, queue_prefix: str):
    """A fresh database `database`, Django set up on it and migrated, the bench pool (limit 8),
    a Celery queue of this process's own, and a Fleet (tests/harness.py) to start workers
    on them: what every bench that runs real workers begins with."""
    use_bench_database(database)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("STEWARD_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    import tests.agents  # noqa: F401 - the benches run the test agents
    from runtime.limits.services import pool_create
    from tests.harness import Fleet

    call_command("migrate", verbosity=0)
    pool_create(name=POOL, actor="bench", max_running=8, max_queued=100_000)
    queue = f"{queue_prefix}-{os.getpid()}"
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    return Fleet(dict(os.environ, STEWARD_QUEUE=queue, STEWARD_AGENT_MODULES="console.dev.demo.agents,tests.agents"))


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
    from runtime.tasks.services import task_submit

    return task_submit(agent=agent, input=payload, tenant="bench", owner="bench", actor="bench", pool=POOL).task_id


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
        span = Step.objects.filter(task_id=task_id, name__startswith="s").aggregate(
            a=Min("started_at"), b=Max("finished_at")
        )
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


def stop_tree_ms(fleet, trees: int = 30, blockers: int = 2, width: int = 49) -> tuple[float, float]:
    """Stop a tree of 50 tasks under load, `trees` times: from task_stop() to the last
    boundary's acknowledgment, from the database's own records (the stop's requested_at,
    its acknowledgments' times).

    Each tree is a t.spawner root waiting for `width` children: `blockers` of them in a
    step that blocks (t.stoppable, each holding a worker, which must interrupt it and
    answer), the rest asleep on a durable timer (answered for in the stop's own
    transaction). Meanwhile a thread keeps about 40 t.steps tasks queued in a pool of
    their own, two of them running at a time: the load. Three workers are added to the
    fleet's two: two for the load, two for the blockers and one for the rest of the tree.
    (With the load's pool as wide as the fleet, its workers drained it and the tree's
    children waited in the default pool behind it for minutes.)"""
    import tempfile
    import threading
    from pathlib import Path

    from django.db import connection
    from django.db.models import Max

    from runtime.models import Stop, StopAck, Task
    from runtime.stops.services import task_stop
    from runtime.tasks.services import task_submit
    from tests.pools import pool_with

    pool_with("bench-stop-load", actor="bench", max_running=2, max_queued=100_000)
    fleet.workers(3)
    done = threading.Event()

    def load():
        try:
            while not done.is_set():
                queued = Task.objects.filter(pool="bench-stop-load", status="queued").count()
                for _ in range(max(0, 40 - queued)):
                    task_submit(
                        agent="t.steps",
                        input={"n": 5},
                        tenant="bench",
                        owner="bench",
                        actor="bench",
                        pool="bench-stop-load",
                    )
                done.wait(0.05)
        finally:
            connection.close()

    loader = threading.Thread(target=load, name="bench-stop-load", daemon=True)
    loader.start()
    samples, calls, outcomes = [], [], {}
    try:
        with tempfile.TemporaryDirectory(prefix="steward-bench-stop-") as tmp:
            for trial in range(trees):
                dirs = [Path(tmp, f"{trial}-{i}") for i in range(blockers)]
                for d in dirs:
                    d.mkdir()
                children = [{"agent": "t.stoppable", "input": {"dir": str(d), "how": "block"}} for d in dirs]
                children += [{"agent": "t.sleeper", "input": {"seconds": 3600}}] * (width - blockers)
                root = submit("t.spawner", {"children": children})
                deadline = time.monotonic() + 300
                while not (
                    all(Path(d, "block").exists() for d in dirs)
                    and Task.objects.filter(root_id=root, status="sleeping").count() == width - blockers
                    and Task.objects.filter(id=root, status="waiting").exists()
                ):
                    if time.monotonic() > deadline:
                        raise SystemExit("bench: a stop tree did not take its shape in 300 s")
                    time.sleep(0.05)
                began = time.perf_counter()
                stop_id = task_stop(task_id=root, actor="user:bench", reason="bench").stop_id
                calls.append((time.perf_counter() - began) * 1000)
                deadline = time.monotonic() + 60
                while not Stop.objects.filter(id=stop_id, finished_at__isnull=False).exists():
                    if time.monotonic() > deadline:
                        raise SystemExit("bench: a stopped tree did not finish in 60 s")
                    time.sleep(0.02)
                stop = Stop.objects.get(id=stop_id)
                acks = StopAck.objects.filter(stop_id=stop_id)
                if acks.values("task_id").distinct().count() != width + 1:
                    raise SystemExit("bench: a stop covered fewer tasks than its tree")
                last = acks.aggregate(at=Max("at"))["at"]
                samples.append((last - stop.requested_at).total_seconds() * 1000)
                outcomes[stop.outcome] = outcomes.get(stop.outcome, 0) + 1
    finally:
        done.set()
        loader.join(30)
    log(
        f"stop tree ms: min {min(samples):.1f} max {max(samples):.1f}; the task_stop() call (its "
        f"transaction) median {statistics.median(calls):.1f} ms; outcomes {outcomes}"
    )
    samples.sort()
    return statistics.median(samples), samples[math.ceil(len(samples) * 0.99) - 1]  # nearest rank: the slowest of 30


def wait_status(task_ids, status: str, timeout: float = 120.0, pause: float = 0.05) -> None:
    from runtime.models import Task

    deadline = time.monotonic() + timeout
    while Task.objects.filter(id__in=task_ids, status=status).count() < len(task_ids):
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: not every task was {status} after {timeout}s")
        time.sleep(pause)


def wake_burst_drain_per_s(fleet_rate: float, n: int = 1000, runs: int = 3) -> float:
    """Median of `runs`: `n` tasks fall asleep on one shared wake time, then drain through
    the bench pool (limit 8) on the fleet's two workers, to the last task's finish. Each task is the fleet figure's five trivial steps after
    its sleep, so the two rates compare. A supervisor process sweeping every second (the
    default SWEEP_SECONDS) wakes them all in one statement; the rate runs from the first
    woken attempt's start, so how soon after the wake time that sweep came (up to a
    second, logged) is not counted as draining. The wake time leaves room for
    every task to fall asleep first at three times the fleet's per-task time (the
    machine's speed varies several-fold), and the run stops if they did not."""
    from django.db.models import Max, Min

    from runtime import db
    from runtime.models import Attempt, Task

    rates = []
    for _ in range(runs):
        now, until = db.fetchone("clock", {"seconds": 5 + 3 * n / fleet_rate})
        ids = [submit("t.wake_burst", {"until": until, "n": 5}) for _ in range(n)]
        wait_status(ids, "sleeping", timeout=until - now)
        asleep, _ = db.fetchone("clock", {"seconds": 0})
        if asleep >= until:
            raise SystemExit("bench: the burst's tasks were not all asleep by their wake time")
        wait_done(ids)
        if Task.objects.filter(id__in=ids).exclude(status="completed").count():
            raise SystemExit("bench: some wake-burst tasks did not complete")
        finished = Task.objects.filter(id__in=ids).aggregate(b=Max("finished_at"))["b"].timestamp()
        woke = Attempt.objects.filter(task_id__in=ids, epoch=2).aggregate(a=Min("started_at"))["a"].timestamp()
        rates.append(n / (finished - woke))
        log(
            f"wake burst: asleep {asleep - now:.1f}s after the first submit; first woken attempt "
            f"{(woke - until) * 1000:.0f} ms after the wake time; drained in {finished - woke:.2f}s"
        )
    log(f"wake burst runs: {[round(r) for r in rates]}")
    return statistics.median(rates)


def approval_resume_ms(n: int = 200) -> tuple[float, float]:
    """From an approval_decide() call to the start of the approved step, on an idle fleet:
    the task waits blocked on its approval (no worker, no slot); the decision re-queues
    it and its wake-up goes out on commit; a worker claims it, replays the request,
    re-checks the package and starts the step. Times as dispatch_ms does (this
    process's clock against the step's database time, one machine)."""
    from runtime.approvals.services import approval_decide
    from runtime.models import Approval, Step

    samples = []
    for i in range(n):
        task_id = submit("t.approve_then_step", {"n": i})
        wait_status([task_id], "blocked", pause=0.002)
        approval_id = Approval.objects.values_list("id", flat=True).get(task_id=task_id)
        decided = time.time()
        approval_decide(approval_id=approval_id, tenant="bench", actor="user:bench-approver", decision="approve")
        wait_done([task_id])
        started = Step.objects.get(task_id=task_id, name="approved").started_at.timestamp()
        samples.append((started - decided) * 1000)
    samples.sort()
    log(f"approval resume ms: min {samples[0]:.2f} max {samples[-1]:.2f}")
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def dispatch_ms(n: int = 200) -> tuple[float, float]:
    samples = sorted(dispatch_samples(n))
    log(f"dispatch ms: min {samples[0]:.2f} max {samples[-1]:.2f}")
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def dispatch_samples(n: int) -> list[float]:
    """`n` dispatches one after another, each ms from submit() to its first step's start."""
    from runtime.models import Step

    samples = []
    for _ in range(n):
        submitted = time.time()
        task_id = submit("t.steps", {"n": 1})
        wait_done([task_id])
        first = Step.objects.get(task_id=task_id, seq=0).started_at.timestamp()
        samples.append((first - submitted) * 1000)
    return samples


def rss_growth_pct(worker, steps: int = 10_000) -> float:
    per_task = 2000
    wait_done([submit("t.steps", {"n": per_task}) for _ in range(2)])  # warm up
    before = worker.rss()
    for _ in range(steps // per_task):
        wait_done([submit("t.steps", {"n": per_task})])
    after = worker.rss()
    log(f"worker rss {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB")
    return (after - before) / before * 100


def load_backlog(pool: str, n: int) -> None:
    """`n` queued tasks in `pool`, written set-wise in one transaction rather than by n
    submits. One INSERT of n rows would fire the admission-count trigger n times on one
    counter row (each update walking the row's growing chain of versions in that
    transaction), so the trigger is off for the load and the count is written once.

    On a connection of the bench's own, with no statement timeout. Django's connections
    carry the runtime's bound, a third of the lease (10 s by default, console/env.py
    connection_bounds, docs/adr/0012-bounded-stale-owners.md), which is there so that a
    stale owner cannot hold its locks past its lease. This load is a fixture that owns
    nothing: it took 4 s with the machine at load 2, and with other test suites running
    beside it (load 5-6) the INSERT outlasted the bound and `make bench` died here
    without printing its JSON. tests/bench_console.py loads on a plain connection too."""
    import psycopg

    with psycopg.connect(_psycopg_url()) as conn, conn.cursor() as cur:
        cur.execute("SET statement_timeout = 0")
        cur.execute("SELECT to_regclass('steward_pool_count') IS NOT NULL")
        (kept,) = cur.fetchone()
        if kept:
            cur.execute("ALTER TABLE steward_task DISABLE TRIGGER steward_pool_count_insert")
        cur.execute(
            """
            INSERT INTO steward_task (id, agent, input, input_digest, tenant, owner, pool, status, epoch,
                                      next_reason, crash_count, status_note, created_at, updated_at, queued_at)
            SELECT gen_random_uuid(), 't.steps', '{"n": 1}', md5(g::text), 'bench', 'bench', %s, 'queued', 0,
                   'first', 0, '', now(), now(), now()
            FROM generate_series(1, %s) g""",
            [pool, n],
        )
        # Run the deferred foreign-key checks now: ALTER TABLE refuses pending trigger events.
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
        if kept:
            cur.execute("ALTER TABLE steward_task ENABLE TRIGGER steward_pool_count_insert")
            cur.execute("INSERT INTO steward_pool_count (pool, shard, admitted) VALUES (%s, 0, %s)", [pool, n])
        conn.commit()
        # Vacuum now, or autovacuum would wake up for the new rows in the middle of the measurement.
        conn.autocommit = True
        cur.execute("VACUUM (ANALYZE) steward_task")


def submit_backlog_ratio(backlog: int = 50_000, n: int = 100, rounds: int = 10) -> float:
    """Submits/s into a pool holding `backlog` queued tasks over submits/s into an empty
    one. Blocks of `n` one-by-one submits alternate between the two pools (ABBA), after a
    warm-up block each; the figure is the median of the `rounds` paired ratios, so a
    drift in the machine's speed (it is shared) cancels within each pair. Run with no
    workers, so only the submits compete for the CPU."""
    from runtime.tasks.services import task_submit
    from tests.pools import pool_with

    pools = ("bench-empty", "bench-backlog")
    for pool in pools:
        pool_with(pool, actor="bench", max_running=8, max_queued=backlog + n * (rounds + 1) + 100)
    load_backlog("bench-backlog", backlog)

    def rate(pool: str) -> float:
        started = time.perf_counter()
        for _ in range(n):
            task_submit(agent="t.steps", input={"n": 1}, tenant="bench", owner="bench", actor="bench", pool=pool)
        return n / (time.perf_counter() - started)

    for pool in pools:
        rate(pool)  # warm-up: connection, prepared statements, compiled functions
    pairs = []
    for i in range(rounds):  # ABBA order: neither pool always goes first
        if i % 2:
            backlogged, empty = rate("bench-backlog"), rate("bench-empty")
        else:
            empty, backlogged = rate("bench-empty"), rate("bench-backlog")
        pairs.append((empty, backlogged))
    log(f"submits/s, empty vs {backlog} queued: {[(round(a), round(b)) for a, b in pairs]}")
    return statistics.median(b / a for a, b in pairs)


def main() -> None:
    if ONLY:
        print(json.dumps(only(ONLY)))
        return
    fleet = bench_fleet(BENCH_DB, "steward-bench")
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
        log("approval resume")
        approval_p50, approval_p99 = approval_resume_ms()
        log("console pages polling (tests/bench_poll.py)")
        polling = console_poll_load()
        log("fleet")
        fleet_rate = fleet_tasks_per_s()
        fleet.supervisors(1, interval=1.0)
        log("wake burst")
        burst_rate = wake_burst_drain_per_s(fleet_rate)
        log("stop a tree under load")
        stop_p50, stop_p99 = stop_tree_ms(fleet)
    finally:
        fleet.stop_all()
    log("submit backlog")
    backlog_ratio = submit_backlog_ratio()
    result = {
        "raw_insert_per_s": round(raw),
        "steps_per_s": round(steps),
        "fleet_tasks_per_s": round(fleet_rate, 1),
        "wake_burst_drain_per_s": round(burst_rate, 1),
        "wake_burst_vs_fleet": round(burst_rate / fleet_rate, 2),
        "dispatch_ms_p50": round(p50, 2),
        "dispatch_ms_p99": round(p99, 2),
        "approval_resume_ms_p50": round(approval_p50, 2),
        "approval_resume_ms_p99": round(approval_p99, 2),
        "worker_rss_growth_pct": round(rss, 2),
        "submit_backlog_ratio": round(backlog_ratio, 2),
        "stop_tree_ms_p50": round(stop_p50, 1),
        "stop_tree_ms_p99": round(stop_p99, 1),
    }
    result.update(polling)
    log("console and API (tests/bench_console.py)")
    result.update(console_and_api())
    log("credential gateway (tests/bench_gateway.py)")
    result.update(own_process("tests.bench_gateway"))
    log("isolated agents (tests/bench_isolated.py)")
    result.update(own_process("tests.bench_isolated"))
    log(f"steps/raw = {steps / raw:.2f}")
    print(json.dumps(result))


def console_poll_load() -> dict:
    """tests/bench_poll.py, on the fleet dispatch_ms_p50 was just measured on (no supervisor)."""
    from tests import bench_poll

    return bench_poll.console_poll_load()


def only(names: list[str]) -> dict:
    """STEWARD_BENCH_ONLY: the figures named, alone (those that need no other's run)."""
    known = {"console_poll_load", "isolated"}
    if set(names) - known:
        raise SystemExit(f"bench: STEWARD_BENCH_ONLY knows only {sorted(known)}")
    if names == ["isolated"]:
        return own_process("tests.bench_isolated")
    fleet = bench_fleet(BENCH_DB, "steward-bench")
    try:
        fleet.workers(1)
        return console_poll_load()
    finally:
        fleet.stop_all()


def console_and_api() -> dict:
    """tests/bench_console.py in a process of its own: it seeds and serves its own
    database, which this process's Django connections know nothing of."""
    return own_process("tests.bench_console")


def own_process(module: str) -> dict:
    """A bench module run as `python -m module` next to DATABASE_URL's database: the JSON
    object it prints last."""
    import subprocess

    env = dict(os.environ, DATABASE_URL=_BASE_URL)
    out = subprocess.run([sys.executable, "-m", module], env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
