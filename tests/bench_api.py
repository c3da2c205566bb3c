"""`make bench`'s API figures (tests/bench.py runs these after its own):

    api_submit_ms_p50   one POST /api/v1/tasks over HTTP with an operate token, median
    api_submit_per_s    the same requests one after another, per second

Each request crosses the whole web stack: a TCP connection to a WSGI server on a local
port, Django's middleware, the token check (console/access.py), the body's schema,
task_submit and its audit row, and the wake-up sent to the broker. The server is
wsgiref's, single-threaded, one connection per request: what it adds is what any
server adds, and the client waits for each answer before sending the next, so the rate
is one caller's, not the web tier's capacity.
"""

from __future__ import annotations

import http.client
import json
import statistics
import threading
import time
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

POOL = "bench-api"
TENANT = "bench"


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):  # one line per request would be the bench's own cost
        pass


def operate_token() -> str:
    from django.contrib.auth import get_user_model

    from console.access import Principal, token_create
    from console.models import OPERATE, OPERATOR, Membership, Tenant

    Tenant.objects.get_or_create(slug=TENANT, defaults={"name": "Bench"})
    user, _ = get_user_model().objects.get_or_create(username="bench-api")
    Membership.objects.update_or_create(user=user, tenant_id=TENANT, defaults={"role": OPERATOR})
    who = Principal(user=user, tenant=TENANT, role=OPERATOR, channel="console", scope=OPERATE,
                    credential="bench:setup")
    return token_create(principal=who, name="bench", scope=OPERATE).secret


def api_submit(n: int = 500, warmup: int = 50) -> tuple[float, float]:
    """(p50 ms, submits per second) of `n` submits after `warmup` unmeasured ones."""
    from django.db import connections

    from console.wsgi import application
    from runtime.errors import PoolExists
    from runtime.limits.services import pool_create

    try:
        pool_create(name=POOL, actor="bench", max_running=1, max_queued=1_000_000)
    except PoolExists:
        pass
    headers = {"Authorization": f"Bearer {operate_token()}", "Content-Type": "application/json"}
    server = make_server("127.0.0.1", 0, application, server_class=WSGIServer, handler_class=_Quiet)
    port = server.server_address[1]

    def serve():
        try:
            server.serve_forever(poll_interval=0.05)
        finally:
            connections.close_all()  # this thread's

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def one(i: int) -> float:
        body = json.dumps({"agent": "t.steps", "input": {"n": 1, "i": i}, "pool": POOL})
        started = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/api/v1/tasks", body=body, headers=headers)
        response = conn.getresponse()
        answer = response.read()
        conn.close()
        if response.status != 201:
            raise RuntimeError(f"submit answered {response.status}: {answer[:300]!r}")
        return time.perf_counter() - started

    try:
        for i in range(warmup):
            one(-1 - i)
        began = time.perf_counter()
        latencies = [one(i) for i in range(n)]
        elapsed = time.perf_counter() - began
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    return statistics.median(latencies) * 1000, n / elapsed


if __name__ == "__main__":  # on its own: python -m tests.bench_api (against DATABASE_URL)
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()
    import tests.agents  # noqa: F401 - registers t.steps

    p50, rate = api_submit()
    print(json.dumps({"api_submit_ms_p50": round(p50, 2), "api_submit_per_s": round(rate, 1)}))
