"""The credential gateway's cost (part of `make bench`; runnable alone as
`python -m tests.bench_gateway`): one JSON object on stdout, progress on stderr.

    gateway_added_ms_p50/p99  what a gateway call adds over calling the fake model
                              directly: the same chat completion, from this process,
                              alternately direct and through the gateway (uvicorn, debug
                              off, as docs/deploy.md serves it), the difference per pair
    gateway_direct_ms_p50     the direct call itself, for scale
    authorize_per_s           authorize() decisions (one statement each, recorded) on one
                              connection, for a task two levels deep

Its own database (STEWARD_BENCH_GATEWAY_DB, default steward_bench_gateway), made anew.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from urllib.parse import urlsplit

from tests.bench import use_bench_database

BENCH_DB = os.environ.get("STEWARD_BENCH_GATEWAY_DB", "steward_bench_gateway")
PAIRS = 600
WARMUP = 50
KEY = "sk-bench-model-key"


def log(message: str) -> None:
    print(f"bench-gateway: {message}", file=sys.stderr, flush=True)


def capability_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return (
        Ed25519PrivateKey.generate()
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )


def post(port: int, path: str, body: bytes, headers: dict) -> float:
    """One request on a new connection (the worker's client opens one per call too): ms."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    elapsed = (time.perf_counter() - started) * 1000
    if response.status != 200:
        raise RuntimeError(f"{path} answered {response.status}: {data[:300]!r}")
    return elapsed


def quantile(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


def authorize_per_s(task_id, n: int = 3000) -> float:
    from runtime.authz.services import authorize

    for _ in range(100):
        authorize(task=task_id, action="model.call", resource="model:fake-1", boundary="credential_gateway")
    rates = []
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(n):
            authorize(task=task_id, action="model.call", resource="model:fake-1", boundary="credential_gateway")
        rates.append(n / (time.perf_counter() - started))
    return statistics.median(rates)


def main() -> dict:
    url = use_bench_database(BENCH_DB)
    pem = capability_pem()
    os.environ.update(DATABASE_URL=url, STEWARD_CAPABILITY_KEY=pem, STEWARD_LOG_LEVEL="WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    from django.core.management import call_command

    # Its tasks are t.steps: under make bench, STEWARD_AGENT_MODULES names only the demo's agents.
    import tests.agents  # noqa: F401
    from console.dev.demo.fake_model import FakeModel
    from runtime.authz.services import grant_create
    from runtime.authz.tokens import token_mint
    from runtime.gateway.services import MODEL_ROUTE
    from runtime.models import Task
    from runtime.tasks.services import insert_task, task_submit
    from tests.bench_console import free_port

    call_command("migrate", verbosity=0)
    parent = task_submit(agent="t.steps", input={}, tenant="acme", owner="user:alice", actor="user:alice").task_id
    root = Task.objects.get(id=parent)
    child = insert_task(
        agent="t.steps",
        input_text="{}",
        digest="bench-child",
        tenant="acme",
        owner="user:alice",
        pool=root.pool_id,
        actor=f"task:{parent}",
        parent_id=parent,
        root_id=parent,
        spawn_seq=1,
    ).task_id
    # As if a worker ran the child: a capability token is good only while its task runs
    # (a stopped task's is denied task_stopped, runtime/sql/authz_decide.sql).
    Task.objects.filter(id=child).update(status="running")
    for principal in ("agent:t.steps", "user:alice"):
        grant_create(tenant="acme", principal=principal, action="model.call", resource="model:*", actor="user:dave")
    log("authorize")
    rate = authorize_per_s(child)

    model = FakeModel(key=KEY).start()
    port = free_port()
    env = dict(
        os.environ,
        STEWARD_DEBUG="0",
        STEWARD_SECRET_KEY=secrets.token_urlsafe(50),
        STEWARD_AGENT_MODULES="tests.agents",
        STEWARD_MODEL_URL=model.url,
        STEWARD_MODEL_KEY=KEY,
        STEWARD_CAPABILITY_KEY=pem,
        STEWARD_SSL_REDIRECT="0",
    )
    from console.dev.web import web_command

    server = subprocess.Popen(web_command(port), env=env)  # uvicorn, as docs/deploy.md serves the gateway
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=1).connect()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("uvicorn did not start") from None
                time.sleep(0.1)
        token = token_mint(task=child, audience=MODEL_ROUTE, seconds=3600)
        body = json.dumps({"model": "fake-1", "messages": [{"role": "user", "content": "hi"}]}).encode()
        direct_headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
        model_port = int(urlsplit(model.url).port)
        added, direct = [], []
        log(f"{PAIRS} pairs of direct and gateway calls")
        for i in range(WARMUP + PAIRS):
            through_headers = {
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/json",
                "Idempotency-Key": f"bench/{i}",
                "Steward-Step": str(i),
            }
            d = post(model_port, "/v1/chat/completions", body, direct_headers)
            g = post(port, "/gateway/model/v1/chat/completions", body, through_headers)
            if i >= WARMUP:
                direct.append(d)
                added.append(g - d)
    finally:
        server.terminate()
        server.wait(timeout=30)
        model.stop()
    return {
        "gateway_added_ms_p50": round(statistics.median(added), 2),
        "gateway_added_ms_p99": round(quantile(added, 99), 2),
        "gateway_direct_ms_p50": round(statistics.median(direct), 2),
        "authorize_per_s": round(rate),
    }


if __name__ == "__main__":
    print(json.dumps(main()))
