"""`make run`: migrate, seed the demo, then start and supervise every Steward process.

Meant to run inside `python -m console.dev.services run --`, which provides DATABASE_URL and
REDIS_URL. Children: the web server, two Celery workers, Celery beat and the demo's fake
external service. Each child's output is prefixed with its name. Each child gets its own
process group, so a terminal Ctrl-C reaches only this supervisor, which then stops them
in order: SIGTERM to each group, SIGKILL to whatever is left after a grace period. If a
child dies on its own, the others are stopped and we exit non-zero naming it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

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


def _port(url: str) -> str:
    return str(urllib.parse.urlsplit(url).port)


def service_commands() -> dict[str, list[str]]:
    port = os.environ.get("STEWARD_PORT", "8000")
    queue = os.environ.get("STEWARD_QUEUE", "steward")
    celery = [PYTHON, "-m", "celery", "-A", "console"]
    worker = [*celery, "worker", "--pool=solo", "-Q", queue, "--without-gossip", "--without-mingle", "-l", "warning"]
    return {
        "web": [PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        "worker1": [*worker, "-n", "worker1@%h"],
        "worker2": [*worker, "-n", "worker2@%h"],
        "beat": [*celery, "beat", "-l", "warning", "-s", ".steward/celerybeat-schedule"],
        # The demo's outside services: results deduplicate by key, notifications do not,
        # and drop the connection on sends 1, 4, 7, ... after acting, so the seeded
        # notify.send meets an `unknown` effect for an operator to resolve.
        "results": [PYTHON, "-m", "console.dev.demo.fake_service", "--port", _port(DEMO_RESULTS_URL), "--mode", "keyed"],
        "notify": [PYTHON, "-m", "console.dev.demo.fake_service", "--port", _port(DEMO_NOTIFY_URL), "--mode", "unkeyed",
                   "--drop-every", "3"],
    }


WIDTH = max(map(len, [*setup_commands(), *service_commands()]))


def say(name: str, line: str) -> None:
    with output_lock:
        sys.stdout.write(f"{name:<{WIDTH}} | {line.rstrip()}\n")
        sys.stdout.flush()


def start(name: str, argv: list[str]) -> subprocess.Popen:
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
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
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def web_answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1).close()
    except urllib.error.HTTPError:
        return True  # any HTTP answer (a redirect to login, a 404) means it is serving
    except (OSError, ValueError):
        return False
    return True


def main() -> int:
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

    children = {name: start(name, argv) for name, argv in service_commands().items()}
    url = f"http://127.0.0.1:{os.environ.get('STEWARD_PORT', '8000')}/"
    announced = False
    while not stopping.is_set():
        for name, process in children.items():
            if process.poll() is not None:
                say("steward", f"{name} exited unexpectedly (exit code {process.returncode}); stopping the others")
                stop(children)
                return 1
        if not announced and web_answers(url):
            say("steward", f"Steward console: {url}  (Ctrl-C stops everything)")
            announced = True
        stopping.wait(0.25)
    say("steward", "stopping all processes")
    stop(children)
    return 0


if __name__ == "__main__":
    sys.exit(main())
