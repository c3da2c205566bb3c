"""The DBOS side of the handoff fixtures: one OS process running DBOS Transact (PyPI,
the `bench` extra) on PostgreSQL, serving two queues until it is killed.

    python -m tests.handoff.dbos_app --database-url URL --executor-id ID

Written the way DBOS's documentation recommends (docs/handoff.md lists the pages):
- each outside call is a step (@DBOS.step), its idempotency key derived from the
  workflow id and the step ("Workflows" tutorial, "Steps" tutorial:
  https://docs.dbos.dev/python/tutorials/workflow-tutorial,
  https://docs.dbos.dev/python/tutorials/step-tutorial);
- work is enqueued on a queue with concurrency limits, registered after launch (DBOS 3.4:
  https://docs.dbos.dev/python/tutorials/queue-tutorial);
- a process that replaces a dead one runs under the dead one's executor id, so DBOS
  recovers that executor's PENDING workflows when it launches
  (https://docs.dbos.dev/architecture, "How Workflow Recovery Works");
- durable sleep is DBOS.sleep; children are workflows started with a workflow id derived
  from the parent's (SetWorkflowID: https://docs.dbos.dev/python/reference/contexts).

The workflows read nothing from the harness but their arguments; the harness reads the
fake service's records and DBOS's system tables.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from console.dev.demo.fake_service import call

QUEUE, RACES = "handoff", "handoff_races"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--executor-id", required=True)
    args = parser.parse_args(argv)

    from dbos import DBOS, DBOSConfig, SetWorkflowID

    config: DBOSConfig = {
        "name": "steward-handoff",
        "system_database_url": args.database_url,
        "executor_id": args.executor_id,
        "log_level": "WARNING",
        "sys_db_pool_size": 6,
    }
    DBOS(config=config)

    @DBOS.step()
    def perform(url: str, key: str, delay: float = 0.0) -> dict:
        # The key is stable across recoveries of this workflow: the service deduplicates.
        return call(url, {"workflow": DBOS.workflow_id}, key=key, worker=str(os.getpid()), delay=delay, timeout=60)

    @DBOS.step()
    def pause(seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    @DBOS.workflow(name="handoff.act")
    def act(url: str, key: str) -> dict:
        return perform(url, key)

    @DBOS.workflow(name="handoff.paced")
    def paced(url: str, key: str, steps: int, seconds: float) -> dict:
        for _ in range(steps):
            pause(seconds)
        receipt = perform(url, key)
        for _ in range(steps):
            pause(seconds)
        return receipt

    @DBOS.workflow(name="handoff.spawn")
    def spawn(url: str, key: str, n: int, seconds: float) -> list:
        handles = []
        for i in range(n):
            pause(seconds)
            with SetWorkflowID(f"{DBOS.workflow_id}-c{i}"):
                handles.append(DBOS.start_workflow(act, url, f"{key}-c{i}"))
        return [h.get_result() for h in handles]

    @DBOS.workflow(name="handoff.timer")
    def timer(url: str, key: str, seconds: float) -> dict:
        DBOS.sleep(seconds)
        return perform(url, key)

    DBOS.launch()
    # One running workflow at a time across every process (global), as Steward's pool.
    DBOS.register_queue(QUEUE, global_concurrency=1, worker_concurrency=1, polling_interval_sec=0.1)
    DBOS.register_queue(RACES, worker_concurrency=8, polling_interval_sec=0.05)
    print(f"ready {os.getpid()}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    DBOS.destroy()


if __name__ == "__main__":
    sys.exit(main())
