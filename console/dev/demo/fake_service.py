"""A fake external service on loopback, standing in for an outside API in tests and the demo.

It is a real HTTP server (stdlib only, no Django) so that workers talk to it exactly as
they would to a results-submission or notification service, including real sockets,
timeouts and lost connections. Run it standalone with

    python -m console.dev.demo.fake_service --port 8765 [--host 127.0.0.1] [--mode keyed|unkeyed]
                                            [--drop-every N]

or in-process with ``FakeService`` (binds port 0 and serves on a daemon thread).

``POST /ops`` performs an operation; the caller names it with the ``Idempotency-Key`` header.
In *keyed* mode a repeated key is deduplicated (200, same op_id); in *unkeyed* mode every call
performs again, which is what a careless external API does and what the runtime must survive.
Faults (``hang``, ``hang_before``, ``fail``, ``drop``) are queued with ``POST /_control``
``{"next": [...]}`` (one consumed per /ops call) or forced per request with ``X-Fake-Behaviour``
(a forced request does not consume the queue). ``drop_every=N`` (``--drop-every N``) drops
calls 1, N+1, 2N+1, ... that have no other behaviour: the demo's notification service
does this, so the demo's first notification is performed and its receipt lost. Control: ``GET /_calls``, ``GET /_ops/<key>``,
``POST /_control``, ``POST /_release``, ``GET /_wait?calls=N|hung=N&timeout=S``.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BEHAVIOURS = frozenset({"hang", "hang_before", "fail", "drop"})
MODES = frozenset({"keyed", "unkeyed"})
_BAD_JSON = object()  # sentinel: the /ops body was not JSON

# Loopback only: never let an http_proxy from the environment intercept these calls.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ServiceRejected(Exception):
    """The service answered 4xx/5xx: it says it did NOT perform the operation."""

    def __init__(self, status: int, body):
        super().__init__(f"service rejected the call: HTTP {status} {body}")
        self.status = status
        self.body = body


def call(
    base_url: str,
    body,
    *,
    key: str | None = None,
    timeout: float = 10.0,
    worker: str | None = None,
    behaviour: str | None = None,
    delay: float = 0.0,
) -> dict:
    """POST one operation to ``<base_url>/ops`` and return the service's JSON receipt.

    The three possible outcomes mean different things to the effect ledger:

    * a dict is returned: the operation was performed (``"deduplicated": true`` means it had
      already been performed under this key). The receipt is authoritative.
    * ``ServiceRejected`` is raised (HTTP 4xx/5xx): the service answered and says it did NOT
      perform the operation, so it is safe to retry or to give up.
    * any other exception (the OSError family: ``URLError``, ``ConnectionError``,
      ``http.client.RemoteDisconnected``, ``TimeoutError``...) propagates unchanged: the
      outcome is UNKNOWN. The operation may well have happened (see ``drop`` and ``hang``),
      so the caller must reconcile (``GET /_ops/<key>``) or retry with the SAME key, and
      must never assume either way.
    """
    headers = {"Content-Type": "application/json"}
    for name, value in (
        ("Idempotency-Key", key),
        ("X-Steward-Worker", worker),
        ("X-Fake-Behaviour", behaviour),
        ("X-Fake-Delay", str(delay) if delay else None),
    ):
        if value is not None:
            headers[name] = value
    req = urllib.request.Request(
        base_url.rstrip("/") + "/ops", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as err:  # only HTTP answers land here, never lost connections
        try:
            payload = _loads(err.read())
        finally:
            err.close()
        raise ServiceRejected(err.code, payload) from None


def http_json(method: str, url: str, body=None, timeout: float = 10.0) -> tuple[int, object]:
    """Small helper for the control endpoints: returns (status, parsed JSON) for any status."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return resp.status, _loads(resp.read())
    except urllib.error.HTTPError as err:
        try:
            return err.code, _loads(err.read())
        finally:
            err.close()


def _loads(raw: bytes):
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode(errors="replace")


class FakeService:
    """The service state plus its HTTP server. Every state change happens under one Condition,
    so the wait_* helpers wake on events instead of polling."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        mode: str = "keyed",
        log: bool = False,
        drop_every: int | None = None,
    ):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        if drop_every is not None and (
            isinstance(drop_every, bool) or not isinstance(drop_every, int) or drop_every < 1
        ):
            raise ValueError(f"drop_every must be a positive integer, got {drop_every!r}")
        self.host, self.port, self.log, self.drop_every = host, port, log, drop_every
        self._cond = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._mode = mode
        self._active = 0
        self._reset_state()

    def _reset_state(self) -> None:  # caller holds the lock (or is __init__)
        self._calls: list[dict] = []
        self._ops: dict[str | None, list[dict]] = {}  # key -> every op performed under it
        self._performed = 0
        self._fifo: collections.deque[str] = collections.deque()
        self._hung: list[dict] = []  # tickets of requests blocked in hang / hang_before
        self._peak = self._active  # requests still in flight keep counting
        self.etag = "v1"  # the target's version, as GET /_etag reports it (an approval's precondition)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> FakeService:
        server = _Server((self.host, self.port), _Handler)
        server.fake = self
        self._server, self._stopping = server, False
        # A short poll interval keeps stop() fast; serving itself is event driven.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-service", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cond:  # wake every hung request and /_wait so their threads can finish
            self._stopping = True
            self._cond.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()
            self._server = None

    def __enter__(self) -> FakeService:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- control -----------------------------------------------------------------------
    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        with self._cond:
            self._mode = mode

    def push(self, *behaviours: str) -> None:
        unknown = set(behaviours) - BEHAVIOURS
        if unknown:
            raise ValueError(f"unknown behaviours {sorted(unknown)}")
        with self._cond:
            self._fifo.extend(behaviours)

    def release(self, count: int | None = None) -> int:
        """Release the oldest `count` hung requests (all if None); returns how many."""
        with self._cond:
            chosen = self._hung if count is None else self._hung[:count]
            for ticket in chosen:
                ticket["released"] = True
            self._hung = [t for t in self._hung if not t["released"]]
            self._cond.notify_all()
            return len(chosen)

    def reset(self) -> None:
        """Forget everything. Released hung requests still answer; a `hang_before` one then
        performs into the fresh state, as a slow request straddling the reset would."""
        with self._cond:  # an RLock underneath, so release() may take it again
            self.release()
            self._reset_state()

    # -- inspection --------------------------------------------------------------------
    def calls(self) -> list[dict]:
        with self._cond:
            return copy.deepcopy(self._calls)

    def performed_count(self) -> int:
        with self._cond:
            return self._performed

    def performed_by_key(self) -> dict:
        with self._cond:
            return {key: len(ops) for key, ops in self._ops.items()}

    def op_for_key(self, key: str) -> dict | None:
        with self._cond:
            ops = self._ops.get(key)
            return dict(copy.deepcopy(ops[0]), times_performed=len(ops)) if ops else None

    @property
    def active(self) -> int:
        with self._cond:
            return self._active

    @property
    def peak_active(self) -> int:
        with self._cond:
            return self._peak

    def snapshot(self) -> dict:
        with self._cond:
            return {
                "calls": copy.deepcopy(self._calls),
                "performed": self._performed,
                "active": self._active,
                "peak_active": self._peak,
                "mode": self._mode,
                "drop_every": self.drop_every,
                "hung": len(self._hung),
                "pending": list(self._fifo),
            }

    def wait_for_calls(self, n: int, timeout: float = 10.0) -> bool:
        return self._wait(lambda: len(self._calls) >= n, timeout)

    def wait_for_hung(self, n: int, timeout: float = 10.0) -> bool:
        return self._wait(lambda: len(self._hung) >= n, timeout)

    def _wait(self, done, timeout: float) -> bool:
        with self._cond:  # stopping wakes waiters too, so a /_wait never outlives the server
            self._cond.wait_for(lambda: done() or self._stopping, timeout)
            return done()

    # -- the operation itself (called from handler threads) ----------------------------
    def _handle_op(self, key, body, worker, forced, delay: float = 0.0) -> tuple[int | None, dict | None, dict]:
        """Returns (status, payload, copy of the call record); status None means drop the
        connection without answering."""
        with self._cond:
            self._active += 1
            self._peak = max(self._peak, self._active)
            seq = len(self._calls) + 1
            behaviour = forced or (self._fifo.popleft() if self._fifo else None) or self._every(seq)
            rec = {
                "seq": seq,
                "key": key,
                "worker": worker,
                "at": time.time(),
                "body": None if body is _BAD_JSON else body,
                "behaviour": behaviour,
                "outcome": "pending",
                "op_id": None,
                "answered": False,
            }
            self._calls.append(rec)
            self._cond.notify_all()
            try:
                if delay:  # Condition.wait releases the lock: other requests proceed meanwhile
                    self._cond.wait_for(lambda: self._stopping, delay)
                status, payload = self._run(rec, key, body, behaviour)
            finally:
                # No longer active once the answer is decided, *before* it is sent: a client
                # holding its receipt must never observe its own request as still in flight.
                self._active -= 1
                self._cond.notify_all()
            rec["answered"] = status is not None
            return status, payload, dict(rec)

    def _every(self, seq: int) -> str | None:
        """The standing behaviour of call `seq` (1-based since start or reset)."""
        if self.drop_every and (seq - 1) % self.drop_every == 0:
            return "drop"
        return None

    def _run(self, rec, key, body, behaviour):  # lock held
        if behaviour == "hang_before":
            self._block(rec)  # a slow service: nothing has happened yet
        if behaviour == "fail":
            rec["outcome"] = "failed"
            return 503, {"error": "UNAVAILABLE"}
        if body is _BAD_JSON or (key is None and self._mode == "keyed"):
            rec["outcome"] = "rejected"
            return 400, {"error": "BAD_JSON" if body is _BAD_JSON else "KEY_REQUIRED"}
        if self._mode == "keyed" and key in self._ops:
            op, status, rec["outcome"] = self._ops[key][0], 200, "deduplicated"
        else:
            self._performed += 1
            op = {"op_id": f"op-{self._performed:04d}", "key": key, "body": body, "at": time.time()}
            self._ops.setdefault(key, []).append(op)
            status, rec["outcome"] = 201, "performed"
        rec["op_id"] = op["op_id"]
        if behaviour == "hang":
            self._block(rec)  # the service did it; the worker just has not heard back yet
        if behaviour == "drop":
            return None, None  # performed, but the receipt is lost
        return status, {"op_id": op["op_id"], "key": key, "deduplicated": status == 200}

    def _block(self, rec) -> None:  # lock held; Condition.wait releases it while blocked
        ticket = {"seq": rec["seq"], "released": False}
        self._hung.append(ticket)
        self._cond.notify_all()
        self._cond.wait_for(lambda: ticket["released"] or self._stopping)
        self._hung = [t for t in self._hung if t is not ticket]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # many concurrent workers must not be refused by the backlog
    fake: FakeService


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "FakeService/1"

    def log_message(self, format, *args) -> None:
        pass  # silent in-process; script mode prints its own one line per /ops call

    def _send(self, status: int, payload) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (its timeout fired while we hung): nobody to tell

    def _body(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return _BAD_JSON

    def do_GET(self) -> None:
        fake, url = self.server.fake, urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/_calls":
            self._send(200, fake.snapshot())
        elif url.path == "/_etag":
            self._send(200, {"etag": fake.etag})
        elif url.path.startswith("/_ops/"):
            op = fake.op_for_key(urllib.parse.unquote(url.path[len("/_ops/") :]))
            self._send(200, op) if op else self._send(404, {"error": "NOT_FOUND"})
        elif url.path == "/_wait":
            try:
                timeout = float(query.get("timeout", ["10"])[0])
                if "hung" in query:
                    ok = fake.wait_for_hung(int(query["hung"][0]), timeout)
                else:
                    ok = fake.wait_for_calls(int(query.get("calls", ["1"])[0]), timeout)
            except ValueError:
                return self._send(400, {"error": "BAD_QUERY"})
            snap = fake.snapshot()
            self._send(200 if ok else 408, {"ok": ok, "calls": len(snap["calls"]), "hung": snap["hung"]})
        else:
            self._send(404, {"error": "NOT_FOUND"})

    def do_POST(self) -> None:
        fake, path = self.server.fake, urllib.parse.urlsplit(self.path).path
        if path == "/ops":
            return self._op(fake)
        body = self._body()
        if not isinstance(body, dict):
            return self._send(400, {"error": "BAD_JSON"})
        try:
            if path == "/_control":
                if body.get("reset"):
                    fake.reset()  # first, so {"reset": true, "next": [...]} works in one call
                if "mode" in body:
                    fake.set_mode(body["mode"])
                if "etag" in body:
                    fake.etag = str(body["etag"])
                fake.push(*body.get("next", []))
                snap = fake.snapshot()
                self._send(200, {"mode": snap["mode"], "pending": snap["pending"]})
            elif path == "/_release":
                self._send(200, {"released": fake.release(body.get("count"))})
            else:
                self._send(404, {"error": "NOT_FOUND"})
        except (ValueError, TypeError) as exc:
            self._send(400, {"error": "BAD_CONTROL", "detail": str(exc)})

    def _op(self, fake: FakeService) -> None:
        forced = self.headers.get("X-Fake-Behaviour")
        if forced is not None and forced not in BEHAVIOURS:
            return self._send(400, {"error": "UNKNOWN_BEHAVIOUR"})
        key, worker = self.headers.get("Idempotency-Key"), self.headers.get("X-Steward-Worker")
        try:  # X-Fake-Delay: take this long to answer (the request counts as active meanwhile)
            delay = min(max(float(self.headers.get("X-Fake-Delay") or 0), 0.0), 10.0)
        except ValueError:
            return self._send(400, {"error": "BAD_DELAY"})
        status, payload, rec = fake._handle_op(key, self._body(), worker, forced, delay)
        if status is None:
            self.close_connection = True  # say nothing; the socket closes on return
        else:
            self._send(status, payload)
        if fake.log:
            print(
                f"#{rec['seq']} key={key} worker={worker} behaviour={rec['behaviour'] or '-'}"
                f" -> {status or 'dropped'} {rec['outcome']} {rec['op_id'] or ''}",
                flush=True,
            )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--mode", choices=sorted(MODES), default="keyed")
    parser.add_argument(
        "--drop-every",
        type=_positive,
        metavar="N",
        help="perform calls 1, N+1, 2N+1, ... but drop the connection instead of answering",
    )
    args = parser.parse_args(argv)
    fake = FakeService(host=args.host, port=args.port, mode=args.mode, log=True, drop_every=args.drop_every).start()
    dropping = f", dropping calls 1, {args.drop_every + 1}, ..." if args.drop_every else ""
    print(f"fake service ({args.mode}{dropping}) listening on {fake.url}", flush=True)
    # The demo stops us with SIGTERM: exit through `finally` like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        threading.Event().wait()  # serve until Ctrl-C / SIGTERM
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
