"""`make bench-dense`: a thousand agents on one host (issue 19), as one JSON object on
stdout; progress on stderr. Every figure is measured in this one run, side by side.

The workload: each attempt streams a model reply from the fake model through the
credential gateway for STREAM_SECONDS (60) at 5 chunks/s, then does one keyed effect
(tests/dense_agents.py). The pieces, all real processes on this machine:

    the fake model      python -m console.dev.demo.fake_model (async: a thousand slow streams)
    the web tier        uvicorn console.asgi (console/dev/web.py), one process, debug off
    workers             celery worker --pool=solo, ATTEMPTS_ENV attempts each (start_workers)
    a supervisor        manage.py steward supervise
    the peer            DBOS Transact, tests/bench_dense_dbos.py, same stream in a step

**The gateway** (measurable on any worker): 1,000 streams held by one web process, played
by tests/gateway_load.py in a process of its own: its RSS (≤ 1 GB), its database
connections, the console's p95 from the same process meanwhile (≤ 150 ms), a revocation's
cut and a stop's acknowledgment among them (≤ 1 s).

**The workers**: the scaling table at 2, 50, 200, 500 and 1,000 attempts (the last over
two worker processes), and the dense_* figures at 500. Until a worker runs many
attempts per process (the dense worker, issue 19's other half), a worker started with
ATTEMPTS_ENV runs one: the bench probes that first (`worker_attempts_at_once`), and then
measures only the rows such workers can hold on one host (2), reporting the others as
null with the reason. Once workers are dense, every row and figure is measured, with
nothing here to change.

**Sleepers**: 10,000 sleeping tasks hold no worker and no connection, and 1,000 of them
waking at once drain at ≥ 0.8 × fleet_tasks_per_s (tests/bench.py's figures).

STEWARD_BENCH_DENSE_DB names the database (default steward_bench_dense), made anew;
STEWARD_BENCH_DENSE_STREAM_SECONDS shortens the streams for a quick look (figures then
are not the issue's); STEWARD_BENCH_DENSE_ONLY=gateway,workers,sleepers,dbos runs some parts.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from tests.bench import log as _log
from tests.bench import use_bench_database

BENCH_DB = os.environ.get("STEWARD_BENCH_DENSE_DB", "steward_bench_dense")
DBOS_DB = BENCH_DB + "_dbos"
STREAM_SECONDS = float(os.environ.get("STEWARD_BENCH_DENSE_STREAM_SECONDS", "60"))
CHUNKS_PER_S = 5
ONLY = set(filter(None, os.environ.get("STEWARD_BENCH_DENSE_ONLY", "gateway,workers,sleepers,dbos").split(",")))
KEY = "sk-bench-dense-" + secrets.token_hex(8)
TENANT = "dense"
GATEWAY_STREAMS = 1000
SCALE = (2, 50, 200, 500, 1000)
DENSE_AT = 500
# How a worker is told how many attempts it runs at once: the dense worker's setting
# (STEWARD_WORKER_ATTEMPTS, runtime/config.py worker_attempts on the i19-dense branch).
# A worker that does not know it ignores it and runs one at a time.
ATTEMPTS_ENV = "STEWARD_WORKER_ATTEMPTS"
PROBE_HEADROOM = 20  # places beyond a stage's attempts, for the dispatch probe's tasks
RSS_LIMIT_MB = 1024


def log(message: str) -> None:
    _log(f"dense: {message}")


# --- the processes -----------------------------------------------------------------------


def capability_pem() -> str:
    from tests.bench_gateway import capability_pem as pem

    return pem()


def wait_port(port: int, process: subprocess.Popen, what: str, timeout: float = 90.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"{what} exited with {process.returncode}") from None
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer within {timeout}s")


def tree_rss(pid: int) -> int:
    """RSS of a process and its children (a worker's sandboxes, uvicorn's workers)."""
    try:
        root = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
    except psutil.NoSuchProcess:
        return 0


def connections(pids=None) -> int:
    """PostgreSQL sessions in the bench database, of these processes (console/env.py names
    each steward:<pid>), or of everything but this process."""
    from django.db import connection

    with connection.cursor() as cur:
        if pids is None:
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name <> %s",
                [f"steward:{os.getpid()}"],
            )
        else:
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = ANY(%s)",
                [[f"steward:{pid}" for pid in pids]],
            )
        return cur.fetchone()[0]


class Stack:
    """The fake model, the web process and a supervisor, on the bench database."""

    def __init__(self, env: dict):
        from tests.bench_console import free_port

        self.env = env
        self.model_port, self.web_port = free_port(), free_port()
        self.model_url = f"http://127.0.0.1:{self.model_port}/v1"
        self.web_url = f"http://127.0.0.1:{self.web_port}"
        self.processes: list[subprocess.Popen] = []

    def start(self) -> Stack:
        from console.dev.web import web_command

        model_env = dict(self.env, STEWARD_MODEL_KEY=KEY)
        self.model = self._start(
            [sys.executable, "-m", "console.dev.demo.fake_model", "--port", str(self.model_port)], model_env
        )
        wait_port(self.model_port, self.model, "the fake model")
        web_env = dict(self.env, STEWARD_MODEL_URL=self.model_url, STEWARD_MODEL_KEY=KEY)
        self.web = self._start(web_command(self.web_port), web_env)
        wait_port(self.web_port, self.web, "uvicorn")
        self.script(reply=" ".join(f"w{i}" for i in range(int(STREAM_SECONDS * CHUNKS_PER_S))))
        return self

    def supervise(self) -> None:
        """A supervisor (after the gateway's figures: their tasks are marked running by
        hand, with no lease a sweep would respect)."""
        self._start([sys.executable, "manage.py", "steward", "supervise", "--interval", "1"], self.env)

    def _start(self, argv, env) -> subprocess.Popen:
        process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=sys.stderr)
        self.processes.append(process)
        return process

    def script(self, **script) -> None:
        import urllib.request

        chunks = int(STREAM_SECONDS * CHUNKS_PER_S)
        body = {"chunks": chunks, "chunk_delay": 1 / CHUNKS_PER_S, **script}
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.model_port}/_control",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30).read()

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


# --- the gateway: 1,000 streams in one web process ----------------------------------------


def running_tasks(n: int) -> list:
    """n tasks as if a worker ran each (status running), for streams with no worker."""
    from runtime.models import Task
    from runtime.tasks.services import task_submit

    ids = [
        task_submit(
            agent="t.steps", input={"n": 1, "i": i}, tenant=TENANT, owner="user:bench", actor="user:bench", pool="gw"
        ).task_id
        for i in range(n)
    ]
    Task.objects.filter(id__in=ids).update(status="running")
    return ids


def gateway_figures(stack: Stack) -> dict:
    from runtime import states
    from runtime.authz.services import grant_create, grant_revoke
    from runtime.authz.tokens import token_mint
    from runtime.gateway.services import MODEL_ROUTE
    from runtime.models import GatewayCall, Stop, StopAck
    from runtime.stops.services import task_stop
    from tests.pools import pool_with

    pool_with("gw", actor="bench", max_running=GATEWAY_STREAMS + 10, max_queued=10)
    # A second tenant: the revocation cuts its 50 streams (the first's grants: main).
    for principal in ("agent:t.steps", "user:bench"):
        grant_create(
            tenant=TENANT + "-r", principal=principal, action="model.call", resource="model:*", actor="user:admin"
        )
    tasks = running_tasks(GATEWAY_STREAMS)
    revoked_tasks = tasks[:50]
    from runtime.models import Task

    Task.objects.filter(id__in=revoked_tasks).update(tenant=TENANT + "-r")
    tokens = {f"gw-{i}": token_mint(task=t, audience=MODEL_ROUTE, seconds=3600) for i, t in enumerate(tasks)}
    web = psutil.Process(stack.web.pid)
    idle_rss = web.memory_info().rss
    quiet_pages = console_p95(stack)  # the same pages over the same rows, no stream running
    out = Path(tempfile.mkstemp(prefix="steward-dense-load-", suffix=".json")[1])
    client = subprocess.Popen(
        [sys.executable, "-m", "tests.gateway_load", stack.web_url + "/", str(out)],
        stdin=subprocess.PIPE,
        stderr=sys.stderr,
        env=dict(os.environ),
    )
    client.stdin.write(json.dumps(tokens).encode())
    client.stdin.close()

    def state() -> dict:
        try:
            return json.loads(out.read_text())
        except (OSError, ValueError):
            return {"flowing": 0, "seen": []}

    started = time.monotonic()
    most = 0
    while time.monotonic() - started < max(STREAM_SECONDS * 0.6, 30):
        most = max(most, state()["flowing"])
        if most >= GATEWAY_STREAMS:
            break
        time.sleep(0.5)
    ramp = time.monotonic() - started
    log(f"gateway: {most} streams flowing after {ramp:.1f}s")
    time.sleep(3)  # all of them flowing for a while: their buffers in use
    rss = web.memory_info().rss
    cpu = web.cpu_percent(interval=2.0)
    web_connections = connections([stack.web.pid])
    pages = console_p95(stack)
    # A stop among them: the stream cut, the gateway's acknowledgment.
    stopped_task = tasks[-1]
    task_stop(task_id=stopped_task, actor="user:bench", reason="one of a thousand")
    stop = Stop.objects.filter(task_id=stopped_task).order_by("-requested_at").first()
    ack = None
    deadline = time.monotonic() + 10
    while ack is None and time.monotonic() < deadline:
        ack = StopAck.objects.filter(stop_id=stop.id, boundary=states.CREDENTIAL_GATEWAY).first()
        time.sleep(0.02)
    stop_ack_ms = (ack.at - stop.requested_at).total_seconds() * 1000 if ack else None
    # A revocation: 50 streams of one tenant cut.
    revoke_at = time.time()
    from runtime.models import Grant

    for grant in Grant.objects.filter(tenant=TENANT + "-r", revoked_at__isnull=True):
        grant_revoke(grant_id=grant.id, tenant=TENANT + "-r", actor="user:admin", reason="bench")
        break  # the agent's or the owner's: either one takes the call's authority away
    revoked_keys = {f"gw-{i}" for i in range(50)}
    deadline = time.monotonic() + 15
    cuts = []
    while time.monotonic() < deadline:
        seen = [s for s in state()["seen"] if s["key"] in revoked_keys]
        if seen and all(s["ended"] for s in seen):
            cuts = [(s["ended_wall"] - revoke_at) * 1000 for s in seen if s["ended"] == "AUTHZ_REVOKED"]
            break
        time.sleep(0.1)
    others_flowing = state()["flowing"]
    client.send_signal(signal.SIGTERM)
    client.wait(60)
    # Every call ends recorded, the hung-up ones partial.
    deadline = time.monotonic() + 60
    while GatewayCall.objects.filter(task_id__in=tasks, outcome="admitted").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = GatewayCall.objects.filter(task_id__in=tasks, outcome="admitted").count()
    out.unlink(missing_ok=True)
    figures = {
        "gateway_concurrent_streams": most,
        "gateway_rss_mb": round(rss / 2**20, 1),
        "gateway_rss_idle_mb": round(idle_rss / 2**20, 1),
        "gateway_rss_kb_per_stream": round((rss - idle_rss) / 1024 / max(most, 1), 1),
        "gateway_db_connections": web_connections,
        "gateway_cpu_pct": round(cpu, 1),
        "console_p95_ms_under_streams": max(pages.values()),
        "console_pages_p95_ms_under_streams": pages,
        "console_p95_ms_no_streams": max(quiet_pages.values()),
        "console_pages_p95_ms_no_streams": quiet_pages,
        "gateway_stop_ack_ms": round(stop_ack_ms, 1) if stop_ack_ms is not None else None,
        "gateway_revoke_cut_ms_max": round(max(cuts), 1) if len(cuts) == 50 else None,
        "gateway_revoke_cut_ms_p50": round(statistics.median(cuts), 1) if cuts else None,
        "gateway_streams_flowing_after_revoke": others_flowing,
        "gateway_calls_left_admitted": left,
    }
    log(f"gateway: {figures}")
    return figures


def console_p95(stack: Stack) -> dict[str, float]:
    """p95 ms of console pages, signed in as alice, from the web process holding the streams."""
    from tests.bench_console import REPEAT, WARM_UP, Client, p95, timed
    from tests.people import PASSWORD

    client = Client(stack.web_port)
    client.sign_in("alice", PASSWORD)
    figures = {}
    for name, path in {"dashboard": "/", "tasks": "/tasks/", "audit": "/audit/"}.items():

        def get(path=path):
            status, _ = client.request("GET", path)
            if status != 200:
                raise RuntimeError(f"GET {path} answered {status}")

        for _ in range(WARM_UP):
            get()
        figures[name] = round(p95([timed(get) for _ in range(REPEAT)]), 1)
    log(f"console p95 ms: {figures}")
    return figures


# --- the workers ---------------------------------------------------------------------------


def start_workers(fleet, n: int, attempts: int) -> list:
    """`n` workers, each told to run `attempts` at once (ATTEMPTS_ENV)."""
    return fleet.workers(n, env={ATTEMPTS_ENV: str(attempts)})


def submit_dense(n: int, pool: str, url: str) -> tuple[list, int]:
    """n t.dense tasks (and how many were refused QUEUE_FULL)."""
    from runtime.errors import QueueFull
    from runtime.tasks.services import task_submit

    ids, refused = [], 0
    for _ in range(n):
        try:
            ids.append(
                task_submit(
                    agent="t.dense",
                    input={"url": url},
                    tenant=TENANT,
                    owner="user:bench",
                    actor="user:bench",
                    pool=pool,
                ).task_id
            )
        except QueueFull:
            refused += 1
    return ids, refused


def streaming_now(ids) -> int:
    """Attempts of these tasks streaming now: running, with their model call admitted."""
    from runtime.models import GatewayCall

    return GatewayCall.objects.filter(task_id__in=ids, outcome="admitted").values("task_id").distinct().count()


def probe_attempts(fleet, url: str) -> int:
    """How many attempts one worker started with ATTEMPTS_ENV=4 runs at once."""
    from tests.pools import pool_with

    pool_with("probe-density", actor="bench", max_running=4, max_queued=10)
    (worker,) = start_workers(fleet, 1, 4)
    ids, _ = submit_dense(4, "probe-density", url)
    most, deadline = 0, time.monotonic() + min(STREAM_SECONDS * 0.5, 20)
    while time.monotonic() < deadline and most < 4:
        most = max(most, streaming_now(ids))
        time.sleep(0.2)
    stop_all(ids)
    worker.kill()
    fleet.processes.remove(worker)
    return most


def stop_all(ids) -> None:
    from runtime.errors import StewardError
    from runtime.stops.services import task_stop

    for task_id in ids:
        try:
            task_stop(task_id=task_id, actor="user:bench", reason="bench stage over")
        except StewardError:
            pass  # it had finished


def dispatch_probe(n: int = 40) -> list[float]:
    """ms from submit to the first step's start of fresh t.steps tasks in their own pool."""
    from runtime.models import Step
    from runtime.tasks.services import task_submit
    from tests.bench import wait_done

    samples = []
    for _ in range(n):
        submitted = time.time()
        task_id = task_submit(
            agent="t.steps", input={"n": 1}, tenant=TENANT, owner="user:bench", actor="user:bench", pool="probe"
        ).task_id
        wait_done([task_id], timeout=60)
        samples.append((Step.objects.get(task_id=task_id, seq=0).started_at.timestamp() - submitted) * 1000)
    return sorted(samples)


def quantile(samples: list[float], q: float) -> float:
    return samples[min(len(samples) - 1, int(math.ceil(q * len(samples))) - 1)]


def stage(fleet, stack: Stack, service, n: int, *, dense: bool) -> dict:
    """n attempts at once: their RSS, connections, dispatch and stop latency, rejections at
    the bounded queue, duplicate effects, and (at DENSE_AT) a kill -9's takeover."""
    from runtime.models import Task
    from tests.pools import pool_with

    processes = 2 if n > DENSE_AT else 1
    per_process = math.ceil(n / processes) + PROBE_HEADROOM
    if not dense and n > 2:
        return {"attempts": n, "measured": False, "why": "solo workers: one attempt per process"}
    if not dense:
        processes, per_process = n, 1
    queued = max(10, n // 10)
    pool = f"dense-{n}"
    pool_with(pool, actor="bench", max_running=n, max_queued=queued)
    pool_with("probe", actor="bench", max_running=PROBE_HEADROOM, max_queued=1000)
    workers = start_workers(fleet, processes, per_process)
    pids = [w.pid for w in workers]
    time.sleep(2)
    idle = sum(tree_rss(p) for p in pids)
    before_ops = dict(service.performed_by_key())
    ids, refused = submit_dense(n, pool, service.url)
    extra, over = submit_dense(queued + 10, pool, service.url)  # the queue's bound: 10 refused
    most, deadline = 0, time.monotonic() + max(STREAM_SECONDS * 0.6, 30)
    while time.monotonic() < deadline and most < n:
        most = max(most, streaming_now(ids))
        time.sleep(0.5)
    time.sleep(2)
    rss = sum(tree_rss(p) for p in pids)
    db = connections()
    dispatch = dispatch_probe() if dense else []
    # One stop among them: from its request to the task cancelled.
    from runtime.stops.services import task_stop

    victim = ids[-1]
    task_stop(task_id=victim, actor="user:bench", reason="one of many")
    from tests.bench import wait_status

    wait_status([victim], "cancelled", timeout=30, pause=0.01)
    task = Task.objects.get(id=victim)
    from runtime.models import Stop

    stop_ms = (task.finished_at - Stop.objects.get(id=task.stop_id).requested_at).total_seconds() * 1000
    takeover = takeover_s(fleet, workers, ids) if n == DENSE_AT and dense else None
    ended = settled(ids + extra, timeout=STREAM_SECONDS * (3 + n / max(most, 1)) + 120)
    ops = service.performed_by_key()
    duplicates = sum(1 for key, count in ops.items() if count - before_ops.get(key, 0) > 1)
    for worker in workers:
        worker.kill()
        fleet.processes.remove(worker)
    row = {
        "attempts": n,
        "measured": True,
        "worker_processes": processes,
        "running_at_once": most,
        "dispatch_ms_p50": round(statistics.median(dispatch), 1) if dispatch else None,
        "dispatch_ms_p99": round(quantile(dispatch, 0.99), 1) if dispatch else None,
        "queue_full_rejections": refused + over,
        "rss_mb": round(rss / 2**20, 1),
        "rss_idle_mb": round(idle / 2**20, 1),
        "rss_mb_per_attempt": round((rss - idle) / 2**20 / max(most, 1), 3),
        "db_connections": db,
        "stop_ms": round(stop_ms, 1),
        "takeover_s": takeover,
        "duplicate_effects": duplicates,
        "ended": ended,
    }
    log(f"stage {n}: {row}")
    return row


def settled(ids, timeout: float) -> dict:
    """Wait until every task has ended (or waits on an operator); how they ended."""
    from django.db.models import Count

    from runtime import states
    from runtime.models import Task

    done = states.TERMINAL | {states.BLOCKED}
    deadline = time.monotonic() + timeout
    while Task.objects.filter(id__in=ids).exclude(status__in=done).exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    counts = Task.objects.filter(id__in=ids).values("status").annotate(n=Count("id"))
    return {row["status"]: row["n"] for row in counts}


def takeover_s(fleet, workers, ids) -> float | None:
    """kill -9 one worker holding attempts; seconds until another worker has taken over
    every attempt it held (a new attempt running for each)."""
    from runtime.models import Attempt

    victim = workers[0]
    held = list(
        Attempt.objects.filter(task_id__in=ids, ended_at__isnull=True, worker__endswith=f":{victim.pid}").values_list(
            "task_id", flat=True
        )
    )
    if not held:
        return None
    spare = start_workers(fleet, 1, len(held) + PROBE_HEADROOM)
    killed = time.time()
    victim.kill()
    on_victim = Attempt.objects.filter(task_id__in=held, worker__endswith=f":{victim.pid}")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        # An attempt that ended on its own just before the kill is not taken over: count
        # only the ones the kill left behind, once the sweep has ended every one of them.
        if not on_victim.filter(ended_at__isnull=True).exists():
            lost = list(on_victim.filter(end_reason="lease_expired").values_list("task_id", flat=True))
            taken = (
                Attempt.objects.filter(task_id__in=lost, started_at__gt=_dt(killed))
                .values("task_id")
                .distinct()
                .count()
            )
            if lost and taken == len(lost):
                return round(time.time() - killed, 2)
        time.sleep(0.2)
    del spare
    return None


def _dt(ts: float):
    import datetime

    return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC)


def worker_figures(stack: Stack, fleet) -> dict:
    from console.dev.demo.fake_service import FakeService

    service = FakeService(mode="unkeyed").start()  # performs every call: a duplicate shows
    try:
        per_process = probe_attempts(fleet, service.url)
        dense = per_process > 1
        log(f"a worker told to run 4 attempts ran {per_process} at once: {'dense' if dense else 'solo'}")
        rows = [stage(fleet, stack, service, n, dense=dense) for n in SCALE]
    finally:
        service.stop()
    at = next(r for r in rows if r["attempts"] == DENSE_AT)
    biggest = max((r for r in rows if r.get("measured")), key=lambda r: r["running_at_once"], default=None)
    result = {
        "worker_attempts_at_once": per_process,
        "dense_scaling": rows,
        "dense_concurrent_attempts": (
            biggest["running_at_once"] if biggest and biggest["rss_mb"] <= RSS_LIMIT_MB else None
        ),
        "dense_rss_mb_per_attempt": at.get("rss_mb_per_attempt"),
        "dense_db_connections": at.get("db_connections"),
        "dense_dispatch_ms_p99": at.get("dispatch_ms_p99"),
        "dense_stop_ms_p99": at.get("stop_ms"),
        "dense_takeover_s": at.get("takeover_s"),
    }
    if not dense:
        result["dense_note"] = "workers run one attempt per process here: the dense figures wait for the dense worker"
    return result


# --- sleepers ------------------------------------------------------------------------------


def sleeper_figures(fleet) -> dict:
    from runtime import db
    from runtime.models import Task
    from tests import bench
    from tests.bench import submit, wait_status

    workers = fleet.workers(2)
    pids = [w.pid for w in workers]
    fleet_rate = bench.fleet_tasks_per_s(runs=1)
    now, until = db.fetchone("clock", {"seconds": 3600})
    before = connections()
    ids = [submit("t.wake_burst", {"until": until, "n": 5}) for _ in range(10_000)]
    wait_status(ids, "sleeping", timeout=900, pause=0.5)
    time.sleep(2)
    held = Task.objects.filter(id__in=ids).exclude(status="sleeping").count()
    after = connections()
    busy = sum(1 for p in pids if psutil.Process(p).cpu_percent(interval=0.5) > 5)
    burst = bench.wake_burst_drain_per_s(fleet_rate, runs=1)
    for worker in workers:
        worker.kill()
        fleet.processes.remove(worker)
    return {
        "sleepers": len(ids),
        "sleepers_not_sleeping": held,
        "sleepers_db_connections_added": after - before,
        "sleepers_busy_workers": busy,
        "fleet_tasks_per_s": round(fleet_rate, 1),
        "wake_burst_drain_per_s": round(burst, 1),
        "wake_burst_vs_fleet": round(burst / fleet_rate, 2),
    }


# --- the peer ------------------------------------------------------------------------------


def dbos_figures(stack: Stack, base_url: str) -> dict:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(base_url)
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DBOS_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DBOS_DB}")
    url = urlunsplit(parts._replace(path=f"/{DBOS_DB}"))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.bench_dense_dbos",
            "--database-url",
            url,
            "--model-url",
            stack.model_url,
            "--key",
            KEY,
            "--n",
            str(DENSE_AT),
        ],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


# --- the run ---------------------------------------------------------------------------------


def main() -> None:
    base_url = os.environ["DATABASE_URL"]
    url = use_bench_database(BENCH_DB)
    pem = capability_pem()
    os.environ.update(STEWARD_CAPABILITY_KEY=pem, STEWARD_LOG_LEVEL="WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    from django.core.management import call_command

    import tests.agents
    import tests.dense_agents  # noqa: F401 - t.dense
    from runtime.limits.services import pool_create
    from tests.bench_console import people
    from tests.harness import Fleet

    call_command("migrate", verbosity=0)
    pool_create(name="bench", actor="bench", max_running=8, max_queued=100_000)
    people()
    from runtime.authz.services import grant_create

    for principal in ("agent:t.steps", "agent:t.dense", "user:bench"):
        grant_create(tenant=TENANT, principal=principal, action="model.call", resource="model:*", actor="user:admin")
    queue = f"steward-bench-dense-{os.getpid()}"
    from django.conf import settings

    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    env = dict(
        os.environ,
        DATABASE_URL=url,
        STEWARD_QUEUE=queue,
        STEWARD_DEBUG="0",
        STEWARD_SSL_REDIRECT="0",  # loopback, no TLS: the console is signed into over plain HTTP
        STEWARD_SECRET_KEY=secrets.token_urlsafe(50),
        STEWARD_AGENT_MODULES="console.dev.demo.agents,tests.agents,tests.dense_agents",
    )
    stack = Stack(env).start()
    fleet = Fleet(dict(env, STEWARD_GATEWAY_URL=stack.web_url))
    result: dict = {"stream_seconds": STREAM_SECONDS, "chunks_per_s": CHUNKS_PER_S}
    try:
        if "gateway" in ONLY:
            log("the gateway: 1,000 streams")
            result.update(gateway_figures(stack))
        stack.supervise()
        if "workers" in ONLY:
            log("the workers: the scaling table")
            result.update(worker_figures(stack, fleet))
        if "dbos" in ONLY:
            log(f"the peer: DBOS, {DENSE_AT} workflows")
            result.update(dbos_figures(stack, base_url))
        if "sleepers" in ONLY:
            log("sleepers: 10,000 asleep, 1,000 waking")
            result.update(sleeper_figures(fleet))
    finally:
        fleet.stop_all()
        stack.stop()
    if result.get("dense_rss_mb_per_attempt") and result.get("dbos_rss_mb_per_workflow"):
        result["dense_rss_vs_dbos"] = round(result["dense_rss_mb_per_attempt"] / result["dbos_rss_mb_per_workflow"], 2)
    else:
        result["dense_rss_vs_dbos"] = None
    if result.get("dense_db_connections") and result.get("dbos_db_connections"):
        result["dense_db_connections_vs_dbos"] = round(
            result["dense_db_connections"] / result["dbos_db_connections"], 2
        )
    else:
        result["dense_db_connections_vs_dbos"] = None
    print(json.dumps(result))


if __name__ == "__main__":
    main()
