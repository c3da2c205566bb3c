"""Real processes for the integration tests: Celery workers and supervisors, started as
the operator would start them, and killed or frozen with real signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import kombu.exceptions
import psutil
import redis

from console.env import as_worker

REPO = Path(__file__).resolve().parent.parent


def wait_until(predicate, *, timeout: float = 20.0, interval: float = 0.02, message: str = "condition"):
    """Poll `predicate` until it returns something truthy; return that, or fail."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def at_once(n: int, fn, *, before=None, after=None) -> list:
    """Run fn(i) on n threads released together by a Barrier, and return each thread's
    result or exception. `before()` runs in each thread ahead of the barrier (so the race
    is the call itself, not its set-up), `after()` in each at the end."""
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def run(i: int) -> None:
        try:
            if before:
                try:
                    before()
                except Exception:
                    # The others would wait out the barrier and report only BrokenBarrierError:
                    # break it now, so that this thread's error is the one the test shows.
                    barrier.abort()
                    raise
            # Generous: on a loaded machine (CI beside other work) n connections can take
            # seconds to open; the race is the call after the barrier, not how soon it comes.
            barrier.wait(timeout=60)
            results[i] = fn(i)
        except Exception as exc:
            results[i] = exc
        finally:
            if after:
                after()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive(), "a racing thread hung"
    return results


# Functions, not `connection.ensure_connection`: `connection` stands for each thread's own
# connection, and a bound method taken in the calling thread would be that thread's.
def _connect() -> None:
    from django.db import connection

    connection.ensure_connection()


def _disconnect() -> None:
    from django.db import connection

    connection.close()


def race(n: int, fn) -> list:
    """at_once, each thread on its own database connection: connected before the
    barrier, closed at the end."""
    from django.db import connection

    # Room in this process's connection pool for every thread at once, or the last ones
    # would wait for a connection instead of racing (and the Barrier would time out).
    # Counted from what is checked out now, not from an empty pool: a connection another
    # thread of this process still holds (an earlier test's, until it is collected) took
    # a slot, and CI once saw the racing threads then one short.
    pool = getattr(connection, "pool", None)
    sizes = (pool.min_size, pool.max_size) if pool is not None else None
    needed = 0
    if pool is not None:
        stats = pool.get_stats()
        needed = stats.get("pool_size", 0) - stats.get("pool_available", 0) + n + 2
    if sizes and sizes[1] < needed:
        pool.resize(sizes[0], needed)
    try:
        return at_once(n, fn, before=_connect, after=_disconnect)
    finally:
        if sizes and sizes[1] < needed:
            pool.resize(*sizes)


class Process:
    """A child process in its own session, with its output kept in a log file."""

    def __init__(self, name: str, argv: list[str], env: dict):
        self.name = name
        self.argv = argv
        self.env = env
        self.log = tempfile.NamedTemporaryFile(prefix=f"steward-{name}-", suffix=".log", delete=False)  # noqa: SIM115 - kept open for the process's life
        self.popen: subprocess.Popen | None = None

    def start(self):
        self.popen = subprocess.Popen(
            self.argv,
            cwd=REPO,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # The child writes through its own descriptor; output() reads the file by name.
        self.log.close()
        return self

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL, and reap it."""
        if self.alive():
            os.kill(self.pid, signal.SIGCONT)  # a frozen process must die too
            os.kill(self.pid, signal.SIGKILL)
            self.popen.wait(10)

    def stop(self, grace: float = 10.0) -> None:
        if not self.alive():
            return
        os.kill(self.pid, signal.SIGCONT)
        os.kill(self.pid, signal.SIGTERM)
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill()

    def rss(self) -> int:
        return psutil.Process(self.pid).memory_info().rss

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")


class Worker(Process):
    """`celery worker --pool=solo`: one process that runs one attempt at a time, so the
    pid that runs an attempt is the pid a test kills. pool="prefork": a master and one
    child that runs the attempts (the master replaces a child that exits)."""

    def __init__(self, name: str, env: dict, *, pool: str = "solo", credential: bool = True):
        self.node = f"{name}@{socket.gethostname()}"
        # A worker process holds no signing key: it asks the web side's minting service
        # with a credential of its own (docs/adr/0034-token-minting.md), made here, in the
        # session's test database. credential=False: a worker of another server (a test's
        # private PostgreSQL), which that database does not hold; it gets no tokens.
        self.credential, secret = worker_credential_secret()
        env = {k: v for k, v in env.items() if k != "STEWARD_CAPABILITY_KEY"}
        env.update(STEWARD_PROCESS="worker")
        if credential:
            env.update(STEWARD_WORKER_CREDENTIAL=secret)
            credential_register(self.credential, secret, name=name)
        self.credential_secret = secret
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "console",
            "worker",
            f"--pool={pool}",
            *(["--concurrency=1"] if pool == "prefork" else []),
            "-Q",
            env["STEWARD_QUEUE"],
            "-n",
            self.node,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "warning",
        ]
        # i21-roles: workers, supervisors and beat connect as the worker role.
        super().__init__(name, argv, as_worker(env))

    def wait_ready(self, timeout: float = 60.0, *, broker_url: str | None = None) -> Worker:
        """Wait until it answers a ping (through `broker_url`, if it is not ours)."""
        from celery import Celery

        from console.celery import app as ours

        apps = [Celery(broker=broker_url, set_as_current=False) if broker_url else ours]

        def answered():
            if not self.alive():
                raise AssertionError(f"worker {self.name} exited:\n{self.output()[-3000:]}")
            try:
                return apps[-1].control.ping(destination=[self.node], timeout=0.3)
            except (OSError, redis.RedisError, kombu.exceptions.OperationalError):
                # The broker restarted under a pooled connection: ping through a new app.
                apps.append(Celery(broker=broker_url or ours.conf.broker_url, set_as_current=False))
                return False

        wait_until(answered, timeout=timeout, interval=0.05, message=f"worker {self.name} to answer a ping")
        return self


def worker_credential_secret() -> tuple[str, str]:
    """(id, `swc.<id>.<secret>`) of a fresh worker credential, as the CLI would make one."""
    import secrets as random

    ident = random.token_hex(8)
    return ident, f"swc.{ident}.{random.token_urlsafe(32)}"


def credential_register(ident: str, secret: str, *, name: str) -> None:
    """The credential's row (its secret hashed), made again if a test's flush removed it:
    a warm worker keeps its credential across the module's tests. Written directly, not
    through worker_credential_create, so that no test's audit trail holds the fleet's
    bookkeeping (the service and its audit event have tests of their own)."""
    from runtime.authz.credentials import secret_hash
    from runtime.models import WorkerCredential

    WorkerCredential.objects.update_or_create(
        id=ident,
        defaults={"name": name, "secret_hash": secret_hash(secret.rpartition(".")[2]), "created_by": "system:tests"},
    )


class Supervisor(Process):
    def __init__(self, name: str, env: dict, interval: float = 0.1):
        argv = [sys.executable, "manage.py", "steward", "supervise", "--interval", str(interval)]
        super().__init__(name, argv, as_worker(env))


class Fleet:
    """Every process a test started; all of them are killed when the test ends."""

    def __init__(self, env: dict, *, credentials: bool = True):
        self.env = env
        self.credentials = credentials  # False: its workers' database is not the session's
        self.processes: list[Process] = []
        self._count = 0

    def workers(self, n: int, *, env: dict | None = None, wait: bool = True, pool: str = "solo") -> list[Worker]:
        """Start `n` workers. wait=False returns at once: a worker armed with a fault point
        may claim a task and hold still before it ever answers a ping."""
        started = []
        for _ in range(n):
            self._count += 1
            name, merged = f"w{self._count}-{os.getpid()}", {**self.env, **(env or {})}
            started.append(Worker(name, merged, pool=pool, credential=self.credentials).start())
        self.processes.extend(started)
        return [w.wait_ready() for w in started] if wait else started

    def credentials_register(self) -> None:
        """Each of its workers' credential rows again: a test's flush removes them, and
        workers that outlive a test (a module's) must still get their attempts' tokens."""
        for worker in self.processes if self.credentials else ():
            if isinstance(worker, Worker):
                credential_register(worker.credential, worker.credential_secret, name=worker.name)

    def supervisors(self, n: int, *, interval: float = 0.1, env: dict | None = None) -> list[Supervisor]:
        started = []
        for _ in range(n):
            self._count += 1
            started.append(Supervisor(f"sup{self._count}", {**self.env, **(env or {})}, interval).start())
        self.processes.extend(started)
        return started

    def beat(self, schedule: Path, *, env: dict | None = None) -> Beat:
        self._count += 1
        started = Beat(f"beat{self._count}", {**self.env, **(env or {})}, schedule).start()
        self.processes.append(started)
        return started

    def stop_all(self) -> None:
        for process in self.processes:
            if os.environ.get("COVERAGE_PROCESS_START"):
                process.stop(grace=5)  # `make coverage`: a process saves its data as it exits
            else:
                process.kill()
        self.processes.clear()


class Beat(Process):
    """`celery beat`: it sends the supervisor sweep to the workers every SWEEP_SECONDS."""

    def __init__(self, name: str, env: dict, schedule: Path):
        argv = [sys.executable, "-m", "celery", "-A", "console", "beat", "-l", "warning", "-s", str(schedule)]
        super().__init__(name, argv, as_worker(env))


class WarmFleet(Fleet):
    """A module's workers, started once and lent to each of its tests (tests/conftest.py
    `warm_fleet`): a Celery worker takes 2 to 3 s to start, and most integration tests
    start one or more and kill none.

    Between tests a warm worker consumes nothing: Celery's remote control cancels its
    consumer of the session's queue, so a test that submits before it starts workers, or
    starts none, finds its tasks queued, as with a fresh fleet. workers(n) with no env and
    the solo pool lends n warm workers (each call in a test lends others: two calls, two
    sets), starting those missing; the worker consumes again before it is handed over.
    Everything else (an env of its own: a fault point, another queue; the prefork pool;
    supervisors, whose sweep some tests must not have; beat) is started for the test
    alone, as Fleet does, and killed at its end. A warm worker the test killed, stopped or
    froze, or one still running an attempt when the test ends, is killed, not lent again.
    """

    def __init__(self, env: dict):
        super().__init__(env)
        self.warm: list[Worker] = []
        self.lent: list[Worker] = []

    def workers(self, n: int, *, env: dict | None = None, wait: bool = True, pool: str = "solo") -> list[Worker]:
        if env or pool != "solo":
            return super().workers(n, env=env, wait=wait, pool=pool)
        idle = [w for w in self.warm if w not in self.lent and _lendable(w)]
        for worker in idle[:n]:
            credential_register(worker.credential, worker.credential_secret, name=worker.name)
        taken = [w for w in idle[:n] if _consume(w, True)]
        started = super().workers(n - len(taken), wait=wait) if n > len(taken) else []
        for worker in started:  # warm from now on: the fleet's, not the test's to kill
            self.processes.remove(worker)
        self.warm += started
        self.lent += taken + started
        return taken + started

    def end_test(self, busy_pids) -> None:
        """Kill the test's own processes, and every warm worker that is dead, frozen or
        still holds an attempt (`busy_pids`); the rest stop consuming until lent again."""
        self.stop_all()
        busy = set(busy_pids)
        for worker in self.warm:
            if not _lendable(worker) or worker.pid in busy or (worker in self.lent and not _consume(worker, False)):
                worker.kill()
        self.warm = [w for w in self.warm if w.alive()]
        self.lent.clear()

    def close(self) -> None:
        self.stop_all()
        for worker in self.warm:
            worker.kill()
        self.warm.clear()


def _lendable(worker: Worker) -> bool:
    if not worker.alive():
        return False
    try:
        return psutil.Process(worker.pid).status() != psutil.STATUS_STOPPED
    except psutil.NoSuchProcess:
        return False


def _consume(worker: Worker, on: bool) -> bool:
    """Start or stop the worker's consumer of its queue; whether it answered that it did."""
    from console.celery import app

    control = app.control.add_consumer if on else app.control.cancel_consumer
    try:
        replies = control(worker.env["STEWARD_QUEUE"], destination=[worker.node], reply=True, timeout=5)
    except (OSError, redis.RedisError, kombu.exceptions.OperationalError):
        return False
    return any(worker.node in reply for reply in replies or [])
