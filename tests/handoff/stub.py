"""A stub runtime for the harness's own tests: threads in this process, a dict for a
store, the same fake service over loopback. Honest by default; `send_twice` makes its
recovery re-send the action under a fresh key (a runtime that forgets its idempotency
key), and `write_after_cancel` makes its running attempt ignore a cancel and write its
completion over it (the Mastra-style late writer). The fixtures must catch both."""

from __future__ import annotations

import threading
import time
import uuid

from console.dev.demo.fake_service import call
from tests.handoff.fixtures import Refused


class StubStore:
    no_acks_reason = "the stub runtime has no stop acknowledgments"

    def __init__(self, runtime: StubRuntime):
        self.rt = runtime

    def status(self, run):
        with self.rt.lock:
            return self.rt.runs.get(run, {}).get("status")

    def attempts(self, run):
        with self.rt.lock:
            return [dict(a) for a in self.rt.runs.get(run, {}).get("attempts", [])]

    def waiting(self):
        with self.rt.lock:
            return sum(1 for r in self.rt.runs.values() if r["status"] == "queued")

    def slots_held(self):
        with self.rt.lock:
            return sum(1 for r in self.rt.runs.values() if r["status"] == "running" and r.get("slot"))

    def descendants(self, run):
        return []

    def children(self, run):
        return []

    def children_created_after(self, run, at):
        return []

    def cancel_recorded(self, run):
        with self.rt.lock:
            return self.rt.runs.get(run, {}).get("cancelled_at") is not None

    def new_attempt_marker(self, run):
        with self.rt.lock:
            resumed = [a for a in self.rt.runs.get(run, {}).get("attempts", []) if a["reason"] == "resume"]
        return f"attempt {resumed[0]['attempt']} reason=resume" if resumed else None

    def acknowledgments(self, run):
        return None


class StubRuntime:
    name = "stub"
    no_bound_reason = ""

    def __init__(self, *, send_twice: bool = False, write_after_cancel: bool = False, pause: float = 0.05):
        self.send_twice = send_twice
        self.write_after_cancel = write_after_cancel
        self.pause = pause
        self.lock = threading.Lock()
        self.runs: dict[str, dict] = {}
        self.queue_bound: int | None = None
        self.running_limit = 8
        self.threads: list[threading.Thread] = []

    # --- adapter ---
    def configure_queue(self, running: int, waiting: int) -> None:
        self.running_limit, self.queue_bound = running, waiting

    def workers(self, n: int) -> None:
        pass

    def submit(self, kind: str, params: dict) -> str:
        run = f"{params['name']}-{uuid.uuid4().hex[:6]}"
        with self.lock:
            running = sum(1 for r in self.runs.values() if r["status"] == "running")
            queued = sum(1 for r in self.runs.values() if r["status"] == "queued")
            if running >= self.running_limit and self.queue_bound is not None and queued >= self.queue_bound:
                raise Refused("QUEUE_FULL")
            self.runs[run] = {"status": "queued", "kind": kind, "url": params["url"], "attempts": [], "slot": False}
        self._dispatch()
        return run

    def resubmit(self, run: str) -> None:
        pass  # the same id again: an honest stub returns the existing run

    def _dispatch(self) -> None:
        with self.lock:
            running = sum(1 for r in self.runs.values() if r["status"] == "running")
            ready = [k for k, r in self.runs.items() if r["status"] == "queued"]
            start = ready[: max(0, self.running_limit - running)]
            for run in start:
                self.runs[run].update(status="running", slot=True)
        for run in start:
            self._attempt(run, "first")

    def _attempt(self, run: str, reason: str) -> None:
        with self.lock:
            r = self.runs[run]
            n = len(r["attempts"]) + 1
            r["attempts"].append({"attempt": n, "reason": reason, "alive": True})
        thread = threading.Thread(target=self._body, args=(run, n), daemon=True)
        self.threads.append(thread)
        thread.start()

    def _live(self, run: str, n: int) -> bool:
        with self.lock:
            r = self.runs[run]
            return r["attempts"][n - 1]["alive"] and (self.write_after_cancel or r["status"] == "running")

    def _body(self, run: str, n: int) -> None:
        r = self.runs[run]
        steps = 3 if r["kind"] in ("paced", "spawn", "timer") else 0
        for _ in range(steps):
            if not self._live(run, n):
                return
            time.sleep(self.pause)
        if not self._live(run, n):
            return
        key = f"{run}:perform" if not (self.send_twice and n > 1) else f"{run}:perform:{n}"
        try:
            call(r["url"], {"run": run}, key=key, worker=f"stub-{n}", timeout=60)
        except OSError:
            return
        for _ in range(steps):
            time.sleep(self.pause)
        with self.lock:
            if not r["attempts"][n - 1]["alive"]:
                return  # cut: the result is never saved
            # The honest write is conditional on the run still running; the buggy one is not.
            if r["status"] == "running" or self.write_after_cancel:
                r.update(status="completed", slot=False)
        self._dispatch()

    def cut(self, run: str, point: str, how: str = "kill") -> None:
        with self.lock:
            for a in self.runs[run]["attempts"]:
                a["alive"] = False

    def replace(self, supervisors: int = 1) -> None:
        with self.lock:
            orphans = [k for k, r in self.runs.items() if r["status"] == "running" and not r["attempts"][-1]["alive"]]
        for run in orphans:  # one recovery per orphan, however many supervisors
            self._attempt(run, "recovery")

    def supervisor_restart(self) -> None:
        pass

    def narrow(self, actor: str, resource: str) -> None:
        raise NotImplementedError

    def cancel(self, run: str) -> None:
        with self.lock:
            r = self.runs[run]
            if r["status"] in ("queued", "running"):
                r.update(status="cancelled", slot=False, cancelled_at=time.time())
        self._dispatch()

    def new_attempt(self, run: str) -> None:
        with self.lock:
            self.runs[run]["attempts"].append(
                {"attempt": len(self.runs[run]["attempts"]) + 1, "reason": "resume", "alive": False}
            )

    def observe(self, run: str) -> list[dict]:
        return StubStore(self).attempts(run)

    def close(self) -> None:
        for thread in self.threads:
            thread.join(5)
