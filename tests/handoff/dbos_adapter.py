"""The DBOS Transact adapter and the harness's reader of DBOS's system tables.

The processes are tests/handoff/dbos_app.py; the adapter enqueues, cancels, forks and
resubmits through DBOSClient (https://docs.dbos.dev/python/reference/client), the way an
outside service drives DBOS workflows. A cut is a SIGKILL of the process whose executor id
DBOS's own workflow_status row names; a recoverer is a process launched under that
executor id (https://docs.dbos.dev/architecture, recovery).
"""

from __future__ import annotations

import sys
import uuid

import psycopg

from tests.handoff.dbos_app import QUEUE, RACES
from tests.harness import Process, wait_until

STATUS = {
    "ENQUEUED": "waiting",
    "PENDING": "running",
    "DELAYED": "waiting",
    "SUCCESS": "completed",
    "ERROR": "failed",
    "CANCELLED": "cancelled",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed",
}


class DbosStore:
    """SQL over the `dbos` schema of DBOS's system database."""

    no_acks_reason = (
        "DBOS has no stop acknowledgments: cancel_workflow sets CANCELLED and the running "
        "step finishes; nothing acknowledges from the process or a gateway"
    )

    def __init__(self, url: str):
        self.url = url

    def _rows(self, sql: str, params=()) -> list[tuple]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    def status(self, run: str) -> str | None:
        rows = self._rows("SELECT status FROM dbos.workflow_status WHERE workflow_uuid = %s", [run])
        return STATUS.get(rows[0][0], rows[0][0]) if rows else None

    def attempts(self, run: str) -> list[dict]:
        rows = self._rows(
            "SELECT executor_id, recovery_attempts, status FROM dbos.workflow_status WHERE workflow_uuid = %s", [run]
        )
        return [{"executor": e, "attempt": n, "status": s} for e, n, s in rows]

    def executor(self, run: str) -> str | None:
        rows = self._rows("SELECT executor_id FROM dbos.workflow_status WHERE workflow_uuid = %s", [run])
        return rows[0][0] if rows else None

    def waiting(self) -> int:
        return self._rows(
            "SELECT count(*) FROM dbos.workflow_status WHERE queue_name = %s AND status = 'ENQUEUED'", [QUEUE]
        )[0][0]

    def slots_held(self) -> int:
        # A queued workflow holds a concurrency slot while PENDING.
        return self._rows(
            "SELECT count(*) FROM dbos.workflow_status WHERE queue_name = %s AND status = 'PENDING'", [QUEUE]
        )[0][0]

    def descendants(self, run: str) -> list[str]:
        rows = self._rows(
            "WITH RECURSIVE t(id) AS (SELECT workflow_uuid FROM dbos.workflow_status WHERE parent_workflow_id = %s "
            "UNION SELECT w.workflow_uuid FROM dbos.workflow_status w JOIN t ON w.parent_workflow_id = t.id) "
            "SELECT id FROM t",
            [run],
        )
        return [r[0] for r in rows]

    def children(self, run: str) -> list[dict]:
        rows = self._rows(
            "SELECT workflow_uuid, status, created_at FROM dbos.workflow_status WHERE parent_workflow_id = %s", [run]
        )
        return [{"run": r, "status": STATUS.get(s, s), "created_ms": c} for r, s, c in rows]

    def children_created_after(self, run: str, at: float) -> list[str]:
        """Children created after the stop that did not end cancelled: admitted work."""
        return [c["run"] for c in self.children(run) if c["created_ms"] > at * 1000 and c["status"] != "cancelled"]

    def cancel_recorded(self, run: str) -> bool:
        return False  # DBOS keeps no cancel record apart from the status itself

    def new_attempt_marker(self, run: str) -> str | None:
        rows = self._rows("SELECT workflow_uuid FROM dbos.workflow_status WHERE forked_from = %s", [run])
        return f"fork {rows[0][0]} forked_from={run}" if rows else None

    def acknowledgments(self, run: str):
        return None


class DbosAdapter:
    name = "dbos"
    queue_bound = None
    no_bound_reason = (
        "DBOS queues bound concurrency and rate, not the waiting line: enqueue never refuses "
        "(https://docs.dbos.dev/python/tutorials/queue-tutorial)"
    )

    def __init__(self, url: str, env: dict):
        self.url = url
        self.env = env
        self.processes: list[Process] = []
        self.by_executor: dict[str, list[Process]] = {}
        self._count = 0
        self._client = None

    def _process(self, executor: str) -> Process:
        self._count += 1
        argv = [sys.executable, "-m", "tests.handoff.dbos_app", "--database-url", self.url, "--executor-id", executor]
        proc = Process(f"dbos{self._count}", argv, self.env).start()
        self.processes.append(proc)
        self.by_executor.setdefault(executor, []).append(proc)
        return proc

    def _ready(self, procs) -> None:
        for p in procs:
            wait_until(lambda p=p: "ready" in p.output() or not p.alive(), timeout=60, message=f"{p.name} ready")
            assert p.alive(), p.output()[-2000:]

    @property
    def client(self):
        if self._client is None:
            from dbos import DBOSClient

            self._client = DBOSClient(system_database_url=self.url)
        return self._client

    def configure_queue(self, running: int, waiting: int) -> None:
        pass  # dbos_app registers `handoff` with global_concurrency=1; there is no waiting bound

    def workers(self, n: int) -> None:
        self._ready([self._process(f"e{len(self.by_executor) + 1}") for _ in range(n)])

    def submit(self, kind: str, params: dict) -> str:
        run = f"{params['name']}-{uuid.uuid4().hex[:8]}"
        queue = QUEUE if kind == "act" else RACES
        args = {
            "act": (params["url"], f"{run}:perform"),
            "paced": (params["url"], f"{run}:perform", 3, 0.1),
            "spawn": (params["url"], f"{run}:perform", 4, 0.1),
            "timer": (params["url"], f"{run}:perform", 0.3),
        }[kind]
        self.client.enqueue({"queue_name": queue, "workflow_name": f"handoff.{kind}", "workflow_id": run}, *args)
        return run

    def resubmit(self, run: str) -> None:
        # The same workflow id again: DBOS's idempotency (SetWorkflowID / workflow_id).
        self.client.enqueue({"queue_name": RACES, "workflow_name": "handoff.paced", "workflow_id": run}, "x", "x", 0, 0)

    def cut(self, run: str, point: str, how: str = "kill") -> None:
        executor = wait_until(lambda: self.store_executor(run), message=f"{run}'s executor")
        for proc in self.by_executor.get(executor, []):
            if how == "kill":
                proc.kill()
            else:
                import signal

                proc.signal(signal.SIGSTOP)
        self._cut = executor

    def store_executor(self, run: str) -> str | None:
        return DbosStore(self.url).executor(run)

    def replace(self, supervisors: int = 1) -> None:
        # The careful self-hosting pattern: restart under the dead process's executor id
        # (after no cut: more processes under executor ids of their own).
        cut = getattr(self, "_cut", None)
        self._ready([self._process(cut or f"e{len(self.by_executor) + 1}") for _ in range(supervisors)])

    def supervisor_restart(self) -> None:
        victim = next(p for p in self.processes if p.alive())
        executor = next(e for e, ps in self.by_executor.items() if victim in ps)
        victim.kill()
        self._ready([self._process(executor)])

    def narrow(self, actor: str, resource: str) -> None:
        raise NotImplementedError("DBOS holds no grants")

    def cancel(self, run: str) -> None:
        # https://docs.dbos.dev/python/tutorials/workflow-management: cancel_workflow
        self.client.cancel_workflow(run, cancel_children=True)

    def new_attempt(self, run: str) -> None:
        # A deliberate new attempt: fork_workflow (workflow-management tutorial), a new id.
        self.client.fork_workflow(run, 1)

    def observe(self, run: str) -> list[dict]:
        return DbosStore(self.url).attempts(run)

    def close(self) -> None:
        for proc in self.processes:
            proc.kill()
        if self._client is not None:
            self._client.destroy()


def fresh_database(admin_url: str, name: str) -> str:
    """A new database for DBOS on the same server; its URL."""
    from urllib.parse import urlsplit, urlunsplit

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(admin_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
