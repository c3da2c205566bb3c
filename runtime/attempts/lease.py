"""Claiming work and keeping the lease alive.

An attempt owns its task while its lease is unexpired. The worker renews it from a
background thread (one per process), so a long model call does not lose the task, and
a frozen or killed process stops renewing it: the supervisor then re-queues the task
with a new attempt (runtime/worker/supervisor.py), and the old attempt's epoch fences every
write it tries later.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from django.db import connection

from runtime import agents, config, db, faults, outages
from runtime.attempts import interrupts
from runtime.meter import meter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lease:
    """What an attempt knows about itself; every write it makes is fenced on it."""

    task_id: object
    epoch: int
    tenant: str
    pool: str
    parent_id: object | None
    worker: str
    attempt_id: int

    @property
    def actor(self) -> str:
        return f"worker:{self.worker}"


@dataclass(frozen=True)
class Claim:
    lease: Lease
    reason: str
    agent: str
    # The stored input as JSON text, decoded by the executor only after the claim has
    # committed: a claim can share a transaction with the end of the worker's previous
    # attempt (runtime/worker/executor.py), and an input that fails to decode must fail its
    # own task, never roll back another task's end.
    input_text: str
    owner: str
    root_id: object
    # The version of the agent's code it runs (runtime/agents.py): one this worker serves,
    # or "" for a task submitted before versions (the current one runs it).
    version: str = ""


@db.reads("claim")
@dataclass(frozen=True, slots=True)
class _Claimed:
    id: object  # the task
    epoch: int
    next_reason: str
    agent: str
    agent_version: str
    input: str  # jsonb, as text on this connection
    tenant: str
    owner: str
    parent_id: object | None
    root_id: object
    pool: str
    attempt_id: int
    waited: float  # seconds it waited in the queue


def claim_next(*, pool: str, worker: str, served: tuple[list[str], list[str]] | None = None) -> Claim | None:
    """Claim the oldest queued task of `pool` whose agent version this process serves, or
    that has not started yet and whose agent it serves (the claim fixes its version to the
    current one), if a slot is free (runtime/sql/claim.sql). `served`: other (agents,
    versions) lists, for a test, the last version listed of each agent its current one."""
    cur = db.cursor()  # check the connection out first, so a fault test can cut it under us
    faults.reach(faults.BEFORE_CLAIM, task_id=pool, step="claim", epoch=0)
    if served is None:
        names, versions, currents = agents.served()
    else:
        names, versions = served
        last = {name: i for i, name in enumerate(names)}
        currents = [last[name] == i for i, name in enumerate(names)]
    params = {
        "pool": pool,
        "worker": worker,
        "credential": credential_id(),
        "lease": config.lease_seconds(),
        "agents": names,
        "versions": versions,
        "currents": currents,
    }
    row = db.fetchone("claim", params, row=_Claimed)
    if row is None:
        return None
    # Counted once the claim commits: it may share a transaction with an attempt's end.
    db.after_commit(cur, lambda: meter.waited(row.waited, tenant=row.tenant))
    lease = Lease(row.id, row.epoch, row.tenant, row.pool, row.parent_id, worker, row.attempt_id)
    return Claim(lease, row.next_reason, row.agent, row.input, row.owner, row.root_id, row.agent_version)


def credential_id() -> str | None:
    """The public half of this worker's credential (swc.<id>.<secret>), recorded on each
    attempt it claims: the minting service gives that attempt's tokens to it alone."""
    held = config.worker_credential()
    return held.split(".")[1] if held else None


class LeaseKeeper:
    """Renews the leases of the attempts this process is running.

    One daemon thread per process, with its own database connection. A renewal that
    matches no live attempt means the task was recovered or stopped under us; the
    attempt's own writes are fenced anyway, so the keeper just stops renewing it.
    """

    def __init__(self):
        self._observers: list = []
        self._held: set[tuple[object, int]] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, lease: Lease) -> None:
        with self._lock:
            self._held.add((lease.task_id, lease.epoch))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="steward-lease-keeper", daemon=True)
                self._thread.start()

    def observe(self, fn) -> None:
        """Call fn(task_id, epoch, status) from the keeper's thread after each renewal
        whose task is no longer running (runtime/worker/stop_watch.py: a stop it missed)."""
        if fn not in self._observers:
            self._observers.append(fn)

    def drop(self, lease: Lease) -> None:
        self.drop_epoch(lease.task_id, lease.epoch)

    def drop_epoch(self, task_id, epoch: int) -> None:
        with self._lock:
            self._held.discard((task_id, epoch))

    def stop(self) -> None:
        """End the keeper thread, which closes its database connection; a later hold()
        starts a new one. For a process that ran attempts in-process (a test session)
        and must let its database go: the idle thread would keep its connection open."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._wake.set()
            thread.join()
            self._wake.clear()

    def _run(self) -> None:
        interval = config.heartbeat_seconds()
        try:
            while not self._wake.wait(interval):
                with self._lock:
                    held = sorted(self._held, key=str)
                if held:
                    self._renew(held)
                # Hand the connection back between rounds: the pool checks it before
                # lending it out again, so a server restart costs no failed renewal.
                connection.close()
        finally:
            connection.close()

    def _renew(self, held: list[tuple[object, int]]) -> None:
        """Renew every lease this process holds in one statement (leases_renew.sql): a
        dense worker's hundreds of attempts cost one round trip per heartbeat, not one
        each. A lease that is gone stops only its own attempt."""
        try:
            renewed = db.fetchall(
                "leases_renew",
                {
                    "tasks": [task_id for task_id, _ in held],
                    "epochs": [epoch for _, epoch in held],
                    "lease": config.lease_seconds(),
                },
                row=_Renewed,
            )
        except db.CONNECTION_ERRORS as exc:
            # The next heartbeat retries on a fresh connection. If the database stays
            # away past the lease, the supervisor recovers the tasks and these attempts'
            # writes are refused: the lease, not this thread, is the source of truth.
            outages.database.failed(exc)
            db.discard_connection()
            return
        except Exception:
            log.exception("lease renewal failed for %d attempt(s)", len(held))
            db.discard_connection()
            return
        outages.database.recovered()
        alive = {(str(row.task_id), row.epoch) for row in renewed}
        for task_id, epoch in held:
            if (str(task_id), epoch) not in alive:
                log.warning("lease of %s epoch %s is gone (recovered or stopped)", task_id, epoch)
                with self._lock:
                    self._held.discard((task_id, epoch))
        for row in renewed:
            if row.paused:  # its tree's pause, if the stop watcher missed the notification
                interrupts.pause_seen(row.task_id, row.epoch)
            if row.status != "running":
                for observer in self._observers:
                    observer(row.task_id, row.epoch, row.status)


@db.reads("leases_renew")
@dataclass(frozen=True, slots=True)
class _Renewed:
    task_id: object  # an attempt renewed: its task
    epoch: int  # and its epoch
    status: str  # the task's status now
    paused: bool  # its tree has an open pause


keeper = LeaseKeeper()
