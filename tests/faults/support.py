"""Helpers shared by the fault tests: arming workers with fault points, finding the
markers they leave (runtime/faults.py), sending real signals, and the end-state checks
every fault test makes (no slot held, nothing admitted left behind)."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

from runtime.limits.selectors import pool_usage
from runtime.models import Attempt, Slot
from runtime.tasks.services import task_submit
from tests.harness import Fleet, Process, Worker, wait_until

TENANT, OWNER = "acme", "user:alice"


def armed(fault_dir: Path, *points: str) -> dict:
    """The environment that makes a worker hold still at `points` (name@step)."""
    return {"STEWARD_FAULT_POINTS": ",".join(points), "STEWARD_FAULT_DIR": str(fault_dir)}


def submit(agent: str, input: dict):
    return task_submit(agent=agent, input=input, tenant=TENANT, owner=OWNER, actor=OWNER)


def marker_path(fault_dir: Path, task_id, point: str) -> Path:
    name, _, step = point.partition("@")
    return fault_dir / f"{task_id}.{name}.{step}"


def read_marker(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def wait_marker(fault_dir: Path, task_id, point: str, timeout: float = 30.0) -> tuple[Path, dict]:
    path = marker_path(fault_dir, task_id, point)
    data = wait_until(lambda: read_marker(path), timeout=timeout, message=f"marker {path.name}")
    return path, data


def markers(fault_dir: Path) -> dict[Path, dict]:
    """Every marker written so far (not the scratch files, not the release files)."""
    found = {}
    for path in fault_dir.iterdir():
        if path.name.startswith(".") or path.name.endswith(".release"):
            continue
        data = read_marker(path)
        if data is not None:
            found[path] = data
    return found


def release(path: Path) -> None:
    """Let a worker held at this marker go on (runtime/faults.py polls for the file)."""
    path.with_name(path.name + ".release").touch()


def start_workers(fleet: Fleet, n: int, *, env: dict) -> list[Worker]:
    """Start `n` workers without waiting for them to answer a ping: an armed worker may
    claim a task and hold still at its fault point before it ever answers one."""
    return fleet.workers(n, env=env, wait=False)


def owner_of(fleet: Fleet, pid: int) -> Process:
    """The process this test started with `pid`: a marker must never name a stranger."""
    for process in fleet.processes:
        if process.popen is not None and process.pid == pid:
            return process
    raise AssertionError(f"pid {pid} is not a process this test started")


def sigkill(fleet: Fleet, pid: int) -> Process:
    """A real SIGKILL to `pid`, then reap it so it is really gone."""
    process = owner_of(fleet, pid)
    os.kill(pid, signal.SIGKILL)
    process.popen.wait(10)
    return process


def worker_name(pid: int) -> str:
    """How the runtime names a worker in attempts and audit rows (executor.worker_id)."""
    return f"{socket.gethostname()}:{pid}"


def attempts_of(task_id) -> list[tuple[int, str, str]]:
    return [(a.epoch, a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=task_id).order_by("epoch")]


def held_slots() -> list:
    return list(Slot.objects.filter(task__isnull=False).values_list("pool", "number", "task", "epoch"))


def admitted_in(pool: str) -> int:
    """Tasks the pool counts against its bound (queued + running)."""
    usage = {u.pool.name: u for u in pool_usage()}[pool]
    return usage.queued + usage.running


def wait_nothing_held(timeout: float = 20.0) -> None:
    """Every attempt has ended and every slot is free again."""
    wait_until(
        lambda: not held_slots() and not Attempt.objects.filter(ended_at__isnull=True).exists(),
        timeout=timeout,
        message="every attempt to end and every slot to be free",
    )
