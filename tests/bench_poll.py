"""`console_poll_load` for `make bench` (issue 20, point 15): what open console pages cost
the work they show. Dispatch p50 (submit() to the first step's start, as dispatch_ms_p50)
with TABS task pages open and polling, over dispatch p50 with none, in one run. Target: at
most 1.1.

The pages are real: a separate process (`python -m tests.bench_poll`, the "browser") signs
in as alice over HTTP, opens each of TABS task pages of acme's sleeping tasks (live, so
their pages poll; nothing on them moves), reads the version each page shows, and then
polls /tasks/<id>/live/ as the page's htmx does: every 2 s (the page's `hx-trigger`), with
the `seen` field the page includes (`hx-include`) and htmx's headers, one request per page
at a time (htmx drops a poll while the last is in flight). The web tier is gunicorn, as
tests/bench_console.py and docs/deploy.md run it, in production settings.

Blocks of dispatches alternate between the two conditions (ABBA), so a drift of the shared
machine's speed falls on both; each "polling" block starts only once every page has polled.
Beside the ratio: each condition's p50, and what the pages did (polls per second and their
answers), so a figure from pages that did not poll cannot pass for one.

`STEWARD_BENCH_ONLY=console_poll_load make bench` runs only this figure.
"""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import statistics
import subprocess
import sys
import threading
import time

TABS = int(os.environ.get("STEWARD_BENCH_POLL_TABS", "200"))
INTERVAL = 2.0  # templates/console/task.html: hx-trigger="every 2s"
ROUNDS = int(os.environ.get("STEWARD_BENCH_POLL_ROUNDS", "4"))  # ABBA rounds; each is a block of each
BLOCK = int(os.environ.get("STEWARD_BENCH_POLL_BLOCK", "30"))  # dispatches per block
BEFORE = os.environ.get("STEWARD_BENCH_POLL_BEFORE", "")
SEEN = re.compile(rb'id="task-seen" name="seen" value="([^"]*)"')


def log(message: str) -> None:
    print(f"bench-poll: {message}", file=sys.stderr, flush=True)


# --- the measuring side (in tests/bench.py's process, on its fleet and database) ------------


def console_poll_load() -> dict:
    from tests.bench import dispatch_samples
    from tests.people import PASSWORD, make_people

    make_people()
    tasks = _sleeping_tasks(TABS)
    env = dict(
        os.environ,
        STEWARD_DEBUG="0",
        STEWARD_SSL_REDIRECT="0",  # loopback HTTP: TLS is the proxy's in front (docs/deploy.md)
        STEWARD_LOG_LEVEL="WARNING",
        STEWARD_SECRET_KEY=os.environ.get("STEWARD_SECRET_KEY") or secrets.token_urlsafe(50),
        STEWARD_AGENT_MODULES="tests.agents",
    )
    # STEWARD_BENCH_POLL_BEFORE=<a checkout>: its web tier too, on the same database, its
    # pages polled in blocks of their own: the figure before a change, in the same run.
    trees = {"after": os.getcwd(), **({"before": BEFORE} if BEFORE else {})}
    servers = {name: _serve(env, tree) for name, tree in trees.items()}
    ports = [f"{name}={port}" for name, (_, port) in servers.items()]
    browser = subprocess.Popen(
        [sys.executable, "-m", "tests.bench_poll", ",".join(ports), "alice", PASSWORD, *tasks],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    conditions = ["idle", *servers]
    samples: dict[str, list[float]] = {c: [] for c in conditions}
    seen: dict[str, list[dict]] = {name: [] for name in servers}
    try:
        _say(browser, "open")
        dispatch_samples(20)  # warm-up, as no block's first dispatch should pay for it
        for i in range(ROUNDS):
            # Each round in another order (rotated, then reversed), so none always comes first.
            order = conditions[i % len(conditions) :] + conditions[: i % len(conditions)]
            for condition in order if i % 2 == 0 else order[::-1]:
                if condition != "idle":
                    cpu = _cpu_seconds(servers[condition][0])  # over the same span as the polls counted
                    _say(browser, f"poll {condition}")  # answers once every page has polled once
                samples[condition] += dispatch_samples(BLOCK)
                if condition != "idle":
                    block = _say(browser, "idle")
                    block["server_cpu_seconds"] = _cpu_seconds(servers[condition][0]) - cpu
                    seen[condition].append(block)
    finally:
        browser.stdin.close()
        browser.wait(timeout=30)
        for server, _ in servers.values():
            server.terminate()
            server.wait(timeout=30)
    idle = statistics.median(samples["idle"])
    result: dict = {"console_poll_dispatch_ms_p50": {"idle": round(idle, 2)}}
    for name, blocks in seen.items():
        polling = statistics.median(samples[name])
        polls = sum(b["polls"] for b in blocks)
        answers: dict[str, int] = {}
        for b in blocks:
            for status, n in b["answers"].items():
                answers[status] = answers.get(status, 0) + n
        figures = {
            "ratio": round(polling / idle, 2),
            "dispatch_ms_p50": round(polling, 2),
            "polls_per_s": round(polls / sum(b["seconds"] for b in blocks), 1),
            "poll_ms_p50": round(statistics.median(b["ms_p50"] for b in blocks), 1),
            "server_cpu_ms_per_poll": round(sum(b["server_cpu_seconds"] for b in blocks) * 1000 / max(polls, 1), 2),
            "browser_cpu_ms_per_poll": round(sum(b["cpu_seconds"] for b in blocks) * 1000 / max(polls, 1), 2),
            "answers": answers,
        }
        log(f"{name}: {figures}")
        result["console_poll_dispatch_ms_p50"][name] = figures.pop("dispatch_ms_p50")
        if name == "after":
            result["console_poll_load"] = figures["ratio"]
        result[f"console_poll_{name}"] = figures
    return result


def _serve(env: dict, tree: str) -> tuple[subprocess.Popen, int]:
    """gunicorn as tests/bench_console.py serves the console, on `tree`'s code."""
    from tests.bench_console import serve

    return serve({**env, "PYTHONPATH": tree}, cwd=tree)


def _cpu_seconds(server: subprocess.Popen) -> float:
    """CPU time of the server's worker processes (user and system), from /proc."""
    total = 0.0
    with open(f"/proc/{server.pid}/task/{server.pid}/children") as children:
        for child in children.read().split():
            with open(f"/proc/{child}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _sleeping_tasks(n: int) -> list[str]:
    """`n` of acme's tasks, asleep for an hour after a first step: live (their pages poll),
    with nothing on their pages moving."""
    from runtime.models import Task
    from runtime.tasks.services import task_submit
    from tests.bench import POOL

    ids = [
        str(
            task_submit(
                agent="t.sleeper", input={"seconds": 3600}, tenant="acme", owner="user:alice", actor="bench", pool=POOL
            ).task_id
        )
        for _ in range(n)
    ]
    deadline = time.monotonic() + 300
    while Task.objects.filter(id__in=ids, status="sleeping").count() < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"bench-poll: the {n} sleepers did not all fall asleep")
        time.sleep(0.2)
    return ids


def _say(browser, word: str) -> dict:
    browser.stdin.write(word + "\n")
    browser.stdin.flush()
    line = browser.stdout.readline()
    if not line:
        raise SystemExit(f"bench-poll: the browser process ended (asked to {word})")
    return json.loads(line)


# --- the browser (its own process) -----------------------------------------------------------


class Tab(threading.Thread):
    """One open task page (on each server): polls its live part every INTERVAL while the
    browser polls, on the server it polls."""

    def __init__(self, ports: dict[str, int], cookies: dict, task_id: str, browser: Browser):
        super().__init__(daemon=True)
        from tests.bench_console import Client

        self.task_id, self.browser = task_id, browser
        self.clients, self.seen, self.headers = {}, {}, {}
        for name, port in ports.items():
            client = self.clients[name] = Client(port)
            client.cookies = dict(cookies)
            status, page = client.request("GET", f"/tasks/{task_id}/")
            found = SEEN.search(page)
            if status != 200 or found is None:
                raise RuntimeError(f"/tasks/{task_id}/ answered {status} without a live part")
            self.seen[name] = found.group(1).decode()
            self.headers[name] = {
                "HX-Request": "true",
                "HX-Trigger": "task-live",
                "HX-Target": "task-live",
                "HX-Current-URL": f"http://127.0.0.1:{port}/tasks/{task_id}/",
                "Accept": "*/*",
            }

    def run(self) -> None:
        tick = time.monotonic() + random.uniform(0, INTERVAL)  # pages opened at different moments
        while True:
            self.browser.polling.wait()
            now = time.monotonic()
            if tick < now:  # htmx drops the ticks that came while a poll was in flight
                tick += ((now - tick) // INTERVAL + 1) * INTERVAL
            time.sleep(tick - now)
            name = self.browser.server
            if not self.browser.polling.is_set() or name is None:
                continue
            started = time.perf_counter()
            status, body = self.clients[name].request(
                "GET", f"/tasks/{self.task_id}/live/?seen={self.seen[name]}", None, self.headers[name]
            )
            self.browser.record(self, status, (time.perf_counter() - started) * 1000)
            if status == 200:
                self.seen[name] = SEEN.search(body).group(1).decode()


class Browser:
    def __init__(self):
        self.polling = threading.Event()
        self.server: str | None = None
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.polls, self.answers, self.ms, self.polled = 0, {}, [], set()
            self.since = time.monotonic()

    def record(self, tab: Tab, status: int, ms: float) -> None:
        with self.lock:
            self.polls += 1
            self.answers[str(status)] = self.answers.get(str(status), 0) + 1
            self.ms.append(ms)
            self.polled.add(tab.task_id)


def browse(ports: dict[str, int], username: str, password: str, task_ids: list[str]) -> None:
    """Commands on stdin, one JSON answer a line on stdout: `open` (sign in, open every
    page on every server), `poll <server>` (start polling it; answers once every page
    polled), `idle` (stop; answers what the pages did since `poll`)."""
    from tests.bench_console import Client

    browser, tabs = Browser(), []

    def answer(obj: dict) -> None:
        print(json.dumps(obj), flush=True)

    for line in sys.stdin:
        word, _, arg = line.strip().partition(" ")
        if word == "open":
            first = Client(next(iter(ports.values())))
            first.sign_in(username, password)  # the session is the database's: every server knows it
            tabs = [Tab(ports, first.cookies, task_id, browser) for task_id in task_ids]
            for tab in tabs:
                tab.start()
            answer({"tabs": len(tabs)})
        elif word == "poll":
            cpu = time.process_time()  # this process's own CPU: what the pages cost this machine
            browser.reset()
            browser.server = arg
            browser.polling.set()
            while len(browser.polled) < len(tabs):
                time.sleep(0.05)
            answer({"polling": len(tabs)})
        elif word == "idle":
            browser.polling.clear()
            time.sleep(INTERVAL / 4)  # the polls in flight end before the next block
            with browser.lock:
                answer(
                    {
                        "polls": browser.polls,
                        "seconds": time.monotonic() - browser.since,
                        "answers": browser.answers,
                        "ms_p50": statistics.median(browser.ms) if browser.ms else 0,
                        "cpu_seconds": time.process_time() - cpu,
                    }
                )


if __name__ == "__main__":
    servers = dict(pair.split("=") for pair in sys.argv[1].split(","))
    browse({name: int(port) for name, port in servers.items()}, sys.argv[2], sys.argv[3], sys.argv[4:])
