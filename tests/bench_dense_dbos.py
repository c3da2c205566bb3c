"""The peer side of `make bench-dense`: DBOS Transact (from PyPI, the `bench` extra) running
N workflows at once, each one step that reads the same streamed HTTP reply Steward's
attempts read (the fake model, a chat completion streamed for the same time at the same
rate), in one process. Prints one JSON object: its version and settings, RSS idle and
with N running, and its PostgreSQL connections meanwhile.

Set up as DBOS's documentation says for that concurrency: a queue (registered after
launch, DBOS 3.4) whose worker_concurrency is the workflows', `max_executor_threads` above it (each running step holds one of its
threads while it waits on I/O), `sys_db_pool_size` 20; its own system database.

    python -m tests.bench_dense_dbos --database-url URL --model-url URL --key KEY --n 500
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
from importlib.metadata import version
from urllib.parse import urlsplit

import psutil


def stream_reply(model_url: str, key: str, ident: str) -> int:
    """The streamed model reply, read to [DONE]: its chunk count (as a worker reads one)."""
    parts = urlsplit(model_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    body = json.dumps({"model": "fake-1", "messages": [{"role": "user", "content": "think"}], "stream": True})
    conn.request(
        "POST",
        parts.path + "/chat/completions",
        body=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Idempotency-Key": ident},
    )
    response = conn.getresponse()
    chunks = 0
    for line in response:
        if line.startswith(b"data: [DONE]"):
            break
        if line.startswith(b"data:"):
            chunks += 1
    conn.close()
    return chunks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--model-url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--settle", type=float, default=10.0)
    args = parser.parse_args()

    from dbos import DBOS, DBOSConfig

    settings = {"max_executor_threads": args.n + 50, "sys_db_pool_size": 20}
    config: DBOSConfig = {
        "name": "steward-bench-dense",
        "system_database_url": args.database_url,
        "log_level": "WARNING",
        **settings,
    }
    DBOS(config=config)
    running = {"now": 0, "max": 0}
    lock = threading.Lock()

    @DBOS.step()
    def streamed(ident: str) -> int:
        with lock:
            running["now"] += 1
            running["max"] = max(running["max"], running["now"])
        try:
            return stream_reply(args.model_url, args.key, ident)
        finally:
            with lock:
                running["now"] -= 1

    @DBOS.workflow()
    def attempt(ident: str) -> int:
        return streamed(ident)

    DBOS.launch()
    # DBOS 3.4: queues are registered after launch, in the system database.
    DBOS.register_queue("dense", worker_concurrency=args.n, polling_interval_sec=0.2)
    queue = DBOS.retrieve_queue("dense")
    me = psutil.Process()
    time.sleep(2)
    idle = me.memory_info().rss
    handles = [queue.enqueue(attempt, f"dbos-{i}") for i in range(args.n)]
    deadline = time.monotonic() + 120
    while running["now"] < args.n and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(args.settle)  # every stream flowing for a while: its buffers in use
    peak_running = running["now"]
    rss = me.memory_info().rss
    connections = _connections(args.database_url)
    results = [h.get_result() for h in handles]
    print(
        json.dumps(
            {
                "dbos_version": version("dbos"),
                "dbos_settings": {**settings, "queue_worker_concurrency": args.n, "queue_polling_interval_sec": 0.2},
                "dbos_running_at_once": peak_running,
                "dbos_rss_idle_mb": round(idle / 2**20, 1),
                "dbos_rss_running_mb": round(rss / 2**20, 1),
                "dbos_rss_mb_per_workflow": round((rss - idle) / 2**20 / max(peak_running, 1), 3),
                "dbos_db_connections": connections,
                "dbos_completed": sum(1 for r in results if r),
            }
        )
    )
    DBOS.destroy()


def _connections(url: str) -> int:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [name]
        ).fetchone()[0]


if __name__ == "__main__":
    sys.exit(main())
