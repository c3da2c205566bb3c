"""`make run`: migrate, seed the demo, then start and supervise every Steward process.

Meant to run inside `python -m console.dev.services run --`, which provides DATABASE_URL and
REDIS_URL. Children: the web server (uvicorn on STEWARD_PORT, default 8000), one dense Celery
worker (WORKER_ATTEMPTS attempts at once, runtime/worker/dense.py),
Celery beat and the demo's fake external services; once the web server accepts
connections, a summary (URLs, the demo login, how to stop) is printed last, and then the
demo watcher (`manage.py watch_demo`) says as each demo task finishes or needs an
operator. Each child's output is prefixed with its name; Celery's banners and uvicorn's
access log are turned off, so the summary stays in view. Each child gets
its own process group, so a terminal Ctrl-C reaches only this supervisor, which then stops
them in order: SIGTERM to each group, SIGKILL to whatever is left after a grace period. If
a child dies on its own (other than the watcher finishing its work), the others are
stopped and we exit non-zero naming it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

from console.dev.demo.logins import DEMO_ADMIN, DEMO_PEOPLE
from console.dev.web import web_command
from console.env import as_worker

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
GRACE_SECONDS = 5.0

stopping = threading.Event()
output_lock = threading.Lock()


def setup_commands() -> dict[str, list[str]]:
    return {
        "migrate": [PYTHON, "manage.py", "migrate", "--noinput"],
        "seed-demo": [PYTHON, "manage.py", "seed_demo"],
    }


# The demo agents read the same variables (console/dev/demo/agents.py).
DEMO_RESULTS_URL = os.environ.setdefault("STEWARD_DEMO_RESULTS_URL", "http://127.0.0.1:8765")
DEMO_NOTIFY_URL = os.environ.setdefault("STEWARD_DEMO_NOTIFY_URL", "http://127.0.0.1:8766")


# The credential gateway's provider (console/gateway/): the fake OpenAI-compatible model
# server unless STEWARD_MODEL_URL names a real one. Its key goes to the web process (and
# the fake model, which requires it) and to no other child: workers reach the model
# through the gateway with capability tokens (docs/deploy.md).
DEMO_MODEL_URL = os.environ.get("STEWARD_DEMO_MODEL_URL", "http://127.0.0.1:8767")
PROVIDER_SECRETS = ("STEWARD_MODEL_KEY", "STEWARD_TOOLS")
# The schema owner's address goes to `migrate` alone: every other child connects as the
# application role (DATABASE_URL), which cannot TRUNCATE or switch a trigger off
# (runtime/roles.py, docs/deploy.md).
OWNER_SECRETS = ("STEWARD_MIGRATE_DATABASE_URL", "STEWARD_TEST_DATABASE_URL")
OWNERS = {"migrate"}
# i21-roles: the worker and beat connect as the worker role (console/env.py as_worker,
# docs/adr/0035-web-and-worker-roles.md), which writes no governance table.
WORKER_ROLE = {"worker", "beat"}


def provider_env(port: int) -> dict[str, dict[str, str]]:
    """What each child adds to the environment: the keys for the web process (and the fake
    model) only, the gateway's address for the workers."""
    real = os.environ.get("STEWARD_MODEL_URL")
    key = os.environ.get("STEWARD_MODEL_KEY") if real else f"sk-demo-{secrets.token_hex(16)}"
    web = {"STEWARD_MODEL_URL": real or DEMO_MODEL_URL + "/v1", "STEWARD_MODEL_KEY": key or ""}
    if os.environ.get("STEWARD_TOOLS"):
        web["STEWARD_TOOLS"] = os.environ["STEWARD_TOOLS"]
    gateway = {"STEWARD_GATEWAY_URL": f"http://127.0.0.1:{port}"}
    return {
        "web": web,
        "model": {"STEWARD_MODEL_KEY": web["STEWARD_MODEL_KEY"]},
        "worker": gateway,
    }


def _port(url: str) -> str:
    return str(urllib.parse.urlsplit(url).port)


# The one worker's places: it runs this many attempts at once, each in a thread of its own
# (docs/adr/0033-dense-worker.md), where `make run` used to start two solo workers.
WORKER_ATTEMPTS = 50


def service_commands(port: int) -> dict[str, list[str]]:
    queue = os.environ.get("STEWARD_QUEUE", "steward")
    # --quiet: no banner (the queue, the broker URL, ASCII art) to push the summary away.
    celery = [PYTHON, "-m", "celery", "-A", "console", "--quiet"]
    worker = [*celery, "worker", "--pool=solo", "-Q", queue, "--without-gossip", "--without-mingle", "-l", "warning"]
    return {
        "web": web_command(port),
        "worker": [*worker, f"--attempts={WORKER_ATTEMPTS}", "-n", "worker@%h"],
        "beat": [*celery, "beat", "-l", "warning", "-s", ".steward/celerybeat-schedule"],
        # The demo's outside services: results deduplicate by key, notifications do not,
        # and drop the connection on sends 1, 4, 7, ... after acting, so the seeded
        # notify.send meets an `unknown` effect for an operator to resolve.
        "results": [
            PYTHON,
            "-m",
            "console.dev.demo.fake_service",
            "--port",
            _port(DEMO_RESULTS_URL),
            "--mode",
            "keyed",
        ],
        "notify": [
            PYTHON,
            "-m",
            "console.dev.demo.fake_service",
            "--port",
            _port(DEMO_NOTIFY_URL),
            "--mode",
            "unkeyed",
            "--drop-every",
            "3",
        ],
        # The credential gateway's model provider: a fake OpenAI-compatible server.
        "model": [PYTHON, "-m", "console.dev.demo.fake_model", "--port", _port(DEMO_MODEL_URL)],
    }


def after_summary_commands() -> dict[str, list[str]]:
    """Started once the summary is out; `demo` exits 0 when every demo task has finished."""
    return {"demo": [PYTHON, "manage.py", "watch_demo"]}


MAY_FINISH = {"demo"}
# A paragraph that would push the summary out of view, about a thing a dev launcher
# means to do: Celery's warning about a worker run as root (a container or a fresh VM
# often is; a deploy must not be).
QUIET = {"PYTHONWARNINGS": "ignore:You're running the worker with superuser privileges"}
WIDTH = max(map(len, [*setup_commands(), *service_commands(0), *after_summary_commands()]))
# The summary's pages.
PAGES = {"console": "/", "API docs": "/api/v1/docs", "admin": "/admin/"}


def port_setting() -> int:
    """STEWARD_PORT, the web server's port: fail loudly on anything but a port number."""
    raw = os.environ.get("STEWARD_PORT", "8000")
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        raise SystemExit(f"steward: STEWARD_PORT must be a port number from 1 to 65535, got {raw[:20]!r}")
    return int(raw)


def summary(port: int) -> list[str]:
    base = f"http://127.0.0.1:{port}"
    people = [
        (f"login {username}", f"{username} / {password}  ({role} of {tenant})")
        for username, (tenant, role, password) in DEMO_PEOPLE.items()
    ]
    rows = [
        *((name, base + path) for name, path in PAGES.items()),
        *people,
        ("admin login", f"{DEMO_ADMIN[0]} / {DEMO_ADMIN[1]}  (the Django admin)"),
        ("CLI", ".venv/bin/python manage.py steward tasks  (in a second terminal)"),
        ("stop", "Ctrl-C stops every process; the data stays for the next `make run`"),
    ]
    width = max(len(name) for name, _ in rows)
    return [
        "",
        f"Steward is running on port {port} (STEWARD_PORT chooses it):",
        *(f"  {name:<{width}}  {value}" for name, value in rows),
        "A `demo` line below says when each demo task finishes or needs you.",
    ]


def say(name: str, line: str) -> None:
    with output_lock:
        sys.stdout.write(f"{name:<{WIDTH}} | {line.rstrip()}\n")
        sys.stdout.flush()


def child_env(name: str, extra: dict[str, dict[str, str]] | None = None) -> dict[str, str]:
    """The child's environment: ours without any provider key, nor the owner's address
    unless it migrates, plus what it alone gets."""
    withheld = PROVIDER_SECRETS + (() if name in OWNERS else OWNER_SECRETS)
    withheld += ("STEWARD_CAPABILITY_KEY",) if name == "worker" else ()  # i21-mint: the web side signs
    env = {k: v for k, v in os.environ.items() if k not in withheld}
    if name in WORKER_ROLE:  # i21-roles
        env = as_worker(env)
    return dict(env, PYTHONUNBUFFERED="1", **QUIET, **(extra or {}).get(name, {}))


def start(name: str, argv: list[str], extra: dict[str, dict[str, str]] | None = None) -> subprocess.Popen:
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        env=child_env(name, extra),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        process_group=0,  # out of the terminal's foreground group: Ctrl-C is ours to handle
    )
    process.pump = threading.Thread(target=pump, args=(name, process.stdout), daemon=True)
    process.pump.start()
    return process


def pump(name: str, stream) -> None:
    for raw in iter(stream.readline, b""):
        say(name, raw.decode(errors="replace"))


def stop(processes: dict[str, subprocess.Popen]) -> None:
    alive = [p for p in processes.values() if p.poll() is None]
    for process in alive:
        signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    for name, process in processes.items():
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say("steward", f"{name} did not stop within {GRACE_SECONDS:.0f}s; killing it")
            signal_group(process, signal.SIGKILL)
            process.wait()
    for process in processes.values():
        process.pump.join(timeout=1)  # let the last lines out


def signal_group(process: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def accepts(port: int) -> bool:
    """uvicorn listens only once the application is loaded (Django set up, its checks
    passed), so a connection that is accepted means it is serving."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


# --- issue 21 (i21-mint) ---
def worker_credential() -> str | None:
    """A fresh credential for `make run`'s worker (the last run's revoked), as the CLI
    makes one: `steward workers credentials create make-run --replace --secret-only`."""
    argv = [
        PYTHON,
        "manage.py",
        "steward",
        "workers",
        "credentials",
        "create",
        "make-run",
        "--replace",
        "--secret-only",
    ]
    done = subprocess.run(argv, cwd=REPO, env=child_env("credential"), capture_output=True, text=True)
    if done.returncode != 0:
        say("steward", f"could not make the worker's credential: {done.stderr.strip()[-500:]}")
        return None
    return done.stdout.strip().splitlines()[-1]


# --- end i21-mint ---


def main() -> int:
    port = port_setting()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda signum, frame: stopping.set())
    (REPO / ".steward").mkdir(exist_ok=True)

    for name, argv in setup_commands().items():
        process = start(name, argv)
        while process.poll() is None and not stopping.is_set():
            stopping.wait(0.1)
        if stopping.is_set():
            stop({name: process})
            return 0
        process.pump.join(timeout=1)
        if process.returncode != 0:
            say("steward", f"{name} (`{' '.join(argv[1:])}`) failed with exit code {process.returncode}")
            return 1

    extra = provider_env(port)
    # --- issue 21 (i21-mint): the worker's own credential for the minting service; the
    # worker holds no signing key (docs/adr/0034-token-minting.md).
    credential = worker_credential()
    if credential is None:
        return 1
    extra["worker"].update(STEWARD_PROCESS="worker", STEWARD_WORKER_CREDENTIAL=credential)
    # --- end i21-mint
    commands = service_commands(port)
    if os.environ.get("STEWARD_MODEL_URL"):
        del commands["model"]  # a real provider: no fake one
    children = {name: start(name, argv, extra) for name, argv in commands.items()}
    announced = False
    while not stopping.is_set():
        for name, process in list(children.items()):
            if process.poll() is None:
                continue
            if name in MAY_FINISH and process.returncode == 0:
                process.pump.join(timeout=1)
                del children[name]
                continue
            hint = f"; if port {port} is taken, choose another with STEWARD_PORT" if name == "web" else ""
            say("steward", f"{name} exited unexpectedly (exit code {process.returncode}){hint}; stopping the others")
            stop(children)
            return 1
        if not announced and accepts(port):
            for line in summary(port):
                say("steward", line)
            children.update({name: start(name, argv) for name, argv in after_summary_commands().items()})
            announced = True
        stopping.wait(0.25)
    say("steward", "stopping all processes")
    stop(children)
    return 0


if __name__ == "__main__":
    sys.exit(main())
