"""The Steward adapter (real Celery workers and `steward supervise` processes:
tests/harness.py Fleet) and the harness's reader of Steward's PostgreSQL tables.

The adapter acts through Steward's services as an operator's call would (task_submit,
task_stop, task_resume, grant_narrow); the reader is plain SQL over steward_task,
steward_attempt, steward_slot and steward_stop_ack, run by the harness itself.
"""

from __future__ import annotations

from django.db import connection

from runtime.errors import QueueFull
from runtime.limits.services import pool_create
from runtime.stops.services import task_stop
from runtime.tasks.services import task_resume, task_submit
from tests.faults.support import sigkill
from tests.handoff.fixtures import Refused
from tests.harness import wait_until

TENANT, OWNER = "acme", "user:alice"


class StewardStore:
    no_acks_reason = ""

    def _rows(self, sql: str, params=()) -> list[tuple]:
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def status(self, run: str) -> str | None:
        rows = self._rows("SELECT status FROM steward_task WHERE id = %s", [run])
        return rows[0][0] if rows else None

    def attempts(self, run: str) -> list[dict]:
        rows = self._rows(
            "SELECT epoch, reason, end_reason, worker FROM steward_attempt WHERE task_id = %s ORDER BY epoch", [run]
        )
        return [{"attempt": e, "reason": r, "end_reason": x, "worker": w} for e, r, x, w in rows]

    def waiting(self) -> int:
        return self._rows("SELECT count(*) FROM steward_task WHERE status = 'queued'")[0][0]

    def slots_held(self) -> int:
        # A slot row is the pool's; it is held while it names a task.
        return self._rows("SELECT count(*) FROM steward_slot WHERE task_id IS NOT NULL")[0][0]

    def descendants(self, run: str) -> list[str]:
        return [
            str(r[0]) for r in self._rows("SELECT id FROM steward_task WHERE root_id = %s AND id <> %s", [run, run])
        ]

    def children(self, run: str) -> list[dict]:
        rows = self._rows(
            "SELECT id, status, extract(epoch FROM created_at) FROM steward_task WHERE parent_id = %s", [run]
        )
        return [{"run": str(r), "status": s, "created": float(c)} for r, s, c in rows]

    def children_created_after(self, run: str, at: float) -> list[str]:
        return [c["run"] for c in self.children(run) if c["created"] > at and c["status"] != "cancelled"]

    def cancel_recorded(self, run: str) -> bool:
        return bool(self._rows("SELECT 1 FROM steward_task WHERE id = %s AND stop_id IS NOT NULL", [run]))

    def new_attempt_marker(self, run: str) -> str | None:
        rows = self._rows("SELECT epoch FROM steward_attempt WHERE task_id = %s AND reason = 'resume'", [run])
        return f"attempt epoch {rows[0][0]} reason=resume" if rows else None

    def acknowledgments(self, run: str) -> list[str]:
        return sorted({r[0] for r in self._rows("SELECT boundary FROM steward_stop_ack WHERE task_id = %s", [run])})

    def decisions(self, run: str) -> list[dict]:
        rows = self._rows(
            "SELECT actor, owner, tenant, parent_task, epoch, boundary, allowed, reason_code, policy_version, "
            "authz_revision FROM steward_decision WHERE task_id = %s ORDER BY at",
            [run],
        )
        names = ("actor", "owner", "tenant", "parent_task", "epoch", "boundary", "allowed", "reason_code")
        return [{**dict(zip(names, r[:8], strict=True)), "policy_version": r[8], "authz_revision": r[9]} for r in rows]

    def gateway_calls(self, run: str) -> list[dict]:
        rows = self._rows(
            "SELECT c.epoch, c.outcome, d.boundary, d.actor, c.tenant FROM steward_gateway_call c "
            "JOIN steward_decision d ON d.id = c.decision_id WHERE c.task_id = %s ORDER BY c.started_at, c.id",
            [run],
        )
        return [{"epoch": e, "outcome": o, "boundary": b, "actor": a, "tenant": t} for e, o, b, a, t in rows]

    def grants(self) -> list[tuple]:
        return self._rows("SELECT * FROM steward_grant ORDER BY id")


AGENTS = {
    "act": ("t.effect", lambda p: {"url": p["url"], "keyed": True, "effect_class": "reversible"}),
    "paced": ("t.paced", lambda p: {"url": p["url"], "pause": 0.1, "steps": 3}),
    "spawn": (
        "t.spawner",
        lambda p: {"children": [{"agent": "t.paced", "input": {"url": p["url"], "pause": 0.1, "steps": 1}}] * 4},
    ),
    "timer": ("t.nap_then_busy", lambda p: {"url": p["url"], "seconds": 0.3}),
    "sleep_then_act": ("t.requires", lambda p: {"url": p["url"], "seconds": 1.5}),
}


class StewardAdapter:
    name = "steward"
    no_bound_reason = ""

    def __init__(self, fleet):
        self.fleet = fleet
        self.queue_bound: int | None = None
        self.submitted: dict[str, tuple] = {}
        self.sups: list = []

    def configure_queue(self, running: int, waiting: int) -> None:
        pool_create(actor=OWNER, name="default", max_running=running, max_queued=waiting)
        self.queue_bound = waiting

    def workers(self, n: int) -> None:
        self.fleet.workers(n)

    def submit(self, kind: str, params: dict) -> str:
        agent, make = AGENTS[kind]
        key = f"{params['name']}"
        try:
            task = task_submit(
                agent=agent, input=make(params), tenant=TENANT, owner=OWNER, actor=OWNER, idempotency_key=key
            )
        except QueueFull as exc:
            raise Refused(f"{exc.code}: {exc}") from exc
        self.submitted[str(task.task_id)] = (agent, make(params), key)
        return str(task.task_id)

    def resubmit(self, run: str) -> None:
        agent, input, key = self.submitted[run]
        task_submit(agent=agent, input=input, tenant=TENANT, owner=OWNER, actor=OWNER, idempotency_key=key)

    def _pid(self, run: str) -> int:
        worker = wait_until(lambda: self._rows_worker(run), message=f"{run}'s running attempt")
        return int(worker.rpartition(":")[2])

    def _rows_worker(self, run: str) -> str | None:
        with connection.cursor() as cur:
            cur.execute("SELECT worker FROM steward_attempt WHERE task_id = %s AND ended_at IS NULL", [run])
            row = cur.fetchone()
        return row[0] if row else None

    def cut(self, run: str, point: str, how: str = "kill") -> None:
        pid = self._pid(run)
        if how == "kill":
            sigkill(self.fleet, pid)
        else:
            import os
            import signal

            os.kill(pid, signal.SIGSTOP)

    def replace(self, supervisors: int = 1) -> None:
        self.sups += self.fleet.supervisors(supervisors)

    def supervisor_restart(self) -> None:
        victim = self.sups.pop(0)
        victim.kill()
        self.sups += self.fleet.supervisors(1)

    # --- delegate less: grants, the gateway (a real web process: gateway_web) ---
    gateway = None  # (web server, fake model), set by the test

    def permit(self) -> None:
        from tests.runtime.authz.common import give, give_both

        give("agent:t.requires", "repo.write", "repo:acme/*")
        self.owner_repo = give(OWNER, "repo.write", "repo:acme/*")
        _, self.owner_model = give_both("model.call", "model:*")

    def narrow(self, actor: str = "owner", resource: str = "") -> None:
        from runtime.authz.services import grant_narrow
        from tests.runtime.authz.common import ADMIN

        grant_narrow(
            grant_id=self.owner_repo.id, tenant=TENANT, resource="repo:acme/docs", actor=ADMIN, reason="narrowed"
        )
        grant_narrow(
            grant_id=self.owner_model.id, tenant=TENANT, resource="model:other", actor=ADMIN, reason="narrowed"
        )

    def gateway_task(self) -> tuple[str, str]:
        from tests.console.gateway.conftest import model_token
        from tests.runtime.authz.common import running_task

        run = running_task()
        return str(run), model_token(run)

    def stream_and_narrow(self, g) -> dict:
        from tests.console.gateway.conftest import completion_body, events, model_url, open_stream, until_error

        web, model = self.gateway
        model.set(reply=" ".join(f"w{i}" for i in range(60)), chunks=60, chunk_delay=0.05)
        with open_stream(model_url(web), token=g[1], body=completion_body(stream=True)) as response:
            stream = events(response)
            first = next(stream)
            self.narrow()
            seen, _ = until_error(stream)
        return {"first": first[0], "events_after_narrow": len(seen), "last": seen[-1][0] if seen else None}

    def replay(self, g) -> dict:
        from tests.console.gateway.conftest import completion_body, model_url, post

        status, answer, _ = post(model_url(self.gateway[0]), token=g[1], body=completion_body(), key=None)
        return {"status": status, "answer": answer}

    def forge(self, g) -> dict:
        from tests.console.gateway.conftest import completion_body, model_url, post

        body = completion_body(user="user:dave", tenant="globex", metadata={"actor": "user:dave"})
        headers = {"X-Steward-Actor": "user:dave", "X-Steward-Tenant": "globex", "X-Forwarded-User": "user:dave"}
        status, answer, _ = post(model_url(self.gateway[0]), token=g[1], body=body, headers=headers, key=None)
        return {"status": status, "answer": answer}

    def hostile(self) -> str:
        task = task_submit(
            agent="t.hostile", input={"grant_id": self.owner_repo.id}, tenant=TENANT, owner=OWNER, actor=OWNER
        )
        return str(task.task_id)

    def cancel(self, run: str) -> None:
        task_stop(task_id=run, actor=OWNER, reason="handoff fixture")

    def new_attempt(self, run: str) -> None:
        task_resume(task_id=run, actor=OWNER, note="deliberate new attempt (handoff fixture)")

    def observe(self, run: str) -> list[dict]:
        return StewardStore().attempts(run)

    def close(self) -> None:
        self.fleet.stop_all()
