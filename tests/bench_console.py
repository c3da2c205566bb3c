"""The console's and the API's figures for `make bench`, through the real web stack: a
gunicorn server over loopback HTTP, signed in as alice (operator of acme), against a
database holding

    100,000 finished tasks (tests/bench_scale.py's load: trees, ten tenants, attempts,
    journal, effects) and their 1,000,000 hash-chained audit events,
    one task with a 5,000-step journal (acme),

    console_p95_ms      the slowest p95 among the task list, the 5,000-step task's page,
                        the audit page filtered by kind, and the dashboard
    api_submit_ms_p50   POST /api/v1/tasks with an operate token, one at a time
    api_submit_per_s    the same from four clients at once

`python -m tests.bench_console` prints its JSON object (tests/bench.py merges it into
`make bench`'s); `--seed-only` only fills the database (STEWARD_BENCH_CONSOLE_DB,
default steward_bench_console), to look at the console over that much data.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import secrets
import socket
import statistics
import subprocess
import sys
import threading
import time
from http.cookies import SimpleCookie
from urllib.parse import urlencode

CONSOLE_DB = os.environ.get("STEWARD_BENCH_CONSOLE_DB", "steward_bench_console")
TASKS = 100_000  # ten audit events each: 1,000,000
STEPS = 5_000
REPEAT = 40  # timed requests per page, after WARM_UP
WARM_UP = 5
SUBMITS = 300
CLIENTS = 4


def log(message: str) -> None:
    print(f"bench-console: {message}", file=sys.stderr, flush=True)


# --- the load -----------------------------------------------------------------------------


def seed() -> tuple[str, str]:
    """A fresh database with the pools, the people, the load and the long task; returns
    the long task's id and an operate token for alice."""
    import django
    import psycopg

    from tests import bench_scale

    with psycopg.connect(bench_scale.server_url("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {CONSOLE_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {CONSOLE_DB}")
    bench_scale.migrate(CONSOLE_DB)
    os.environ["DATABASE_URL"] = bench_scale.server_url(CONSOLE_DB)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()
    from tests.pools import pool_with

    for pool in ("default", "research", "bench-api"):
        pool_with(pool, actor="bench", max_running=8, max_queued=1_000_000)
    secret = people()
    started = time.monotonic()
    with psycopg.connect(bench_scale.server_url(CONSOLE_DB)) as conn:
        bench_scale.load(conn, db=CONSOLE_DB, tasks=TASKS)
        long_task = _long_task(conn)
        conn.commit()
    with psycopg.connect(bench_scale.server_url(CONSOLE_DB), autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    log(f"loaded {TASKS:,} tasks, their audit trail and a {STEPS:,}-step task in {time.monotonic() - started:.0f} s")
    return long_task, secret


def _long_task(conn) -> str:
    """A completed acme task with STEPS journal rows, one attempt and its audit events
    (written through the link trigger, so they chain as the runtime's do)."""
    with conn.cursor() as cur:
        cur.execute("SET session_replication_role = origin")  # the load turned triggers off
        (task_id,) = cur.execute("""
            INSERT INTO steward_task (id, agent, input, input_digest, tenant, owner, pool, status, epoch,
                                      next_reason, crash_count, status_note, created_at, updated_at, queued_at,
                                      started_at, finished_at, output)
            VALUES (steward_uuid7(now()), 't.steps', '{"n": 5000}', md5('long'), 'acme', 'user:alice', 'default',
                    'completed', 1, 'first', 0, '', now() - interval '1 hour', now(), now() - interval '1 hour',
                    now() - interval '59 minutes', now() - interval '1 minute', '{"total": 5000}')
            RETURNING id::text""").fetchone()
        cur.execute(
            """
            INSERT INTO steward_attempt (task_id, epoch, worker, reason, started_at, heartbeat_at, lease_expires_at,
                                         ended_at, end_reason)
            VALUES (%s, 1, 'host-0:1000', 'first', now() - interval '59 minutes', now() - interval '1 minute',
                    now(), now() - interval '1 minute', 'complete')""",
            [task_id],
        )
        cur.execute(
            """
            INSERT INTO steward_step (task_id, seq, name, kind, output, error, epoch, started_at, finished_at)
            SELECT %s, q, 'step-' || q, 'step', jsonb_build_object('v', q), NULL, 1,
                   now() - interval '59 minutes' + q * interval '10 ms',
                   now() - interval '59 minutes' + q * interval '10 ms' + interval '4 ms'
            FROM generate_series(0, %s) q""",
            [task_id, STEPS - 1],
        )
        for kind, data in (
            ("task.submitted", {"agent": "t.steps", "pool": "default", "owner": "user:alice"}),
            ("attempt.started", {"epoch": 1, "reason": "first"}),
            ("task.completed", {"epoch": 1}),
        ):
            cur.execute(
                "INSERT INTO steward_audit (actor, tenant, task_id, kind, data) VALUES (%s, 'acme', %s, %s, %s)",
                ["user:alice", task_id, kind, json.dumps(data)],
            )
    return task_id


def people() -> str:
    """The personas, and an operate token for alice; returns the token's secret."""
    from console.access import Principal, token_create
    from tests.people import make_people

    cast = make_people()
    alice = Principal(
        user=cast.alice, tenant="acme", role="operator", channel="api", scope="operate", credential="bench"
    )
    return token_create(principal=alice, name="bench", scope="operate").secret


# --- the server ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(env: dict, cwd: str | None = None) -> tuple[subprocess.Popen, int]:
    """gunicorn on a free loopback port, as docs/deploy.md runs the web tier, in
    production settings (debug off): what an operator's browser would meet. `cwd`: the
    checkout whose code it serves (this one's by default)."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "console.wsgi",
            "--workers",
            "3",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=cwd,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, port
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {server.returncode}") from None
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("gunicorn did not answer within 60 s")


class Client:
    """One keep-alive HTTP connection with a cookie jar: a signed-in browser tab."""

    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
        headers = dict(headers or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        self.conn.request(method, path, body=body, headers=headers)
        response = self.conn.getresponse()
        data = response.read()
        for header in response.headers.get_all("Set-Cookie") or []:
            for name, morsel in SimpleCookie(header).items():
                self.cookies[name] = morsel.value
        return response.status, data

    def sign_in(self, username: str, password: str) -> None:
        status, page = self.request("GET", "/login/")
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        if status != 200 or token is None:
            raise RuntimeError(f"/login/ answered {status} without a CSRF token")
        form = urlencode(
            {"username": username, "password": password, "csrfmiddlewaretoken": token.group(1).decode()}
        ).encode()
        status, _ = self.request(
            "POST",
            "/login/",
            form,
            {
                "Content-Type": "application/x-www-form-urlencoded",
                "Referer": f"http://127.0.0.1:{self.conn.port}/login/",
            },
        )
        if status != 302 or "sessionid" not in self.cookies:
            raise RuntimeError(f"signing in as {username} answered {status}")


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1]


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def console_pages(port: int, long_task: str) -> dict[str, float]:
    """p95 ms of each page, signed in as alice."""
    from tests.people import PASSWORD

    client = Client(port)
    client.sign_in("alice", PASSWORD)
    pages = {
        "dashboard": "/",
        "tasks": "/tasks/",
        "task_5000_steps": f"/tasks/{long_task}/",
        "audit_by_kind": "/audit/?kind=effect.committed",
    }
    figures = {}
    for name, path in pages.items():

        def get(path=path):
            status, _ = client.request("GET", path)
            if status != 200:
                raise RuntimeError(f"GET {path} answered {status}")

        for _ in range(WARM_UP):
            get()
        figures[name] = round(p95([timed(get) for _ in range(REPEAT)]), 1)
    log(f"console p95 ms: {figures}")
    return figures


def api_submits(port: int, secret: str) -> tuple[float, float]:
    """(p50 ms one at a time, submits/s from CLIENTS at once)."""
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    body = json.dumps({"agent": "t.steps", "input": {"n": 1}, "pool": "bench-api"}).encode()

    def submit(client: Client) -> None:
        status, data = client.request("POST", "/api/v1/tasks", body, headers)
        if status not in (200, 201):
            raise RuntimeError(f"POST /api/v1/tasks answered {status}: {data[:200]!r}")

    one = Client(port)
    for _ in range(WARM_UP * 4):
        submit(one)
    p50 = statistics.median(timed(lambda: submit(one)) for _ in range(SUBMITS))

    barrier, failures = threading.Barrier(CLIENTS + 1), []

    def run() -> None:
        client = Client(port)
        submit(client)  # its connection made before the clock starts
        barrier.wait()
        try:
            for _ in range(SUBMITS // CLIENTS):
                submit(client)
        except Exception as error:  # reported below: a bench must not hide a failure
            failures.append(error)

    threads = [threading.Thread(target=run) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    if failures:
        raise failures[0]
    rate = (SUBMITS // CLIENTS) * CLIENTS / seconds
    log(f"api submit p50 {p50:.2f} ms; {rate:.0f}/s from {CLIENTS} clients")
    return p50, rate


def main() -> None:
    long_task, secret = seed()
    url = os.environ["DATABASE_URL"]
    if "--seed-only" in sys.argv:
        log(f"seeded {CONSOLE_DB}; the 5,000-step task is {long_task}")
        return
    env = dict(
        os.environ,
        DATABASE_URL=url,
        STEWARD_DEBUG="0",
        STEWARD_SSL_REDIRECT="0",  # loopback HTTP: TLS is the proxy's in front (docs/deploy.md)
        STEWARD_LOG_LEVEL="WARNING",
        STEWARD_SECRET_KEY=os.environ.get("STEWARD_SECRET_KEY") or secrets.token_urlsafe(50),
        STEWARD_AGENT_MODULES="tests.agents",
    )
    server, port = serve(env)
    try:
        pages = console_pages(port, long_task)
        p50, rate = api_submits(port, secret)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(
        json.dumps(
            {
                "console_p95_ms": max(pages.values()),
                "console_pages_p95_ms": pages,
                "api_submit_ms_p50": round(p50, 2),
                "api_submit_per_s": round(rate),
            }
        )
    )


if __name__ == "__main__":
    main()
