"""Many model streams through the credential gateway at once, from one event loop: what
plays the workers' side in the tests of many streams (tests/console/gateway/
test_gateway_many.py) and in `make bench-dense`'s gateway figures.

Each stream is one `POST /gateway/model/v1/chat/completions` with `"stream": true`, read
event by event as a worker's client reads it (runtime/gateway/client.py), on its own
connection. What each saw is kept: when it began flowing, how many chunks came, and how
it ended (`[DONE]`, or its terminal error event and when that came), so a test asks
"was every stream cut within a second of the revocation" of the records.

    with Streams(url) as streams:            # a loop in a thread of its own
        streams.open(tokens)                 # one stream per capability token
        streams.wait_flowing(len(tokens))
        ...

or as a process of its own (the bench, so that its reading costs the measuring process
nothing): `python -m tests.gateway_load URL OUT < tokens.json` opens the streams, writes
what it has seen to OUT (JSON, times from time.time()) twice a second, and ends when
every stream has ended or on SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

import aiohttp


@dataclass
class Seen:
    """One stream, as its client saw it."""

    key: str
    status: int | None = None
    first_at: float | None = None  # monotonic: its first chunk
    chunks: int = 0
    ended: str | None = None  # "done", an error code (AUTHZ_REVOKED, TASK_STOPPED, ...), or "broken"
    ended_at: float | None = None
    ended_wall: float | None = None  # time.time() of ended_at, for another process's clock
    details: dict = field(default_factory=dict)


def _end(seen: Seen, how: str, details: dict | None = None) -> None:
    seen.ended, seen.ended_at, seen.ended_wall = how, time.monotonic(), time.time()
    if details is not None:
        seen.details = details


class Streams:
    def __init__(self, gateway_url: str, *, body: dict | None = None, limit: int = 0):
        self.url = gateway_url.rstrip("/") + "/gateway/model/v1/chat/completions"
        self.body = body or {"model": "fake-1", "messages": [{"role": "user", "content": "think"}], "stream": True}
        self.seen: dict[str, Seen] = {}
        self.limit = limit  # connections at once (0: no bound)
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="gateway-load")
        self._session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Future] = []

    def __enter__(self) -> Streams:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Hang up every stream still open, and end the loop."""
        if self._loop.is_closed():
            return

        async def shutdown():
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            if self._session is not None:
                await self._session.close()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def open(self, tokens: dict[str, str], *, spread: float = 0.0) -> None:
        """One stream per (Idempotency-Key, capability token), started `spread` seconds apart."""

        async def start():
            if self._session is None:
                self._session = aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=self.limit, force_close=True),
                    timeout=aiohttp.ClientTimeout(total=None, sock_read=300),
                    trust_env=False,
                )
            for key, token in tokens.items():
                with self._lock:
                    self.seen[key] = Seen(key)
                self._tasks.append(asyncio.ensure_future(self._stream(key, token)))
                if spread:
                    await asyncio.sleep(spread)

        asyncio.run_coroutine_threadsafe(start(), self._loop).result(600)

    async def _stream(self, key: str, token: str) -> None:
        seen = self.seen[key]
        headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": key, "Content-Type": "application/json"}
        try:
            async with self._session.post(self.url, data=json.dumps(self.body), headers=headers) as response:
                seen.status = response.status
                if response.status != 200:
                    seen.details = await response.json(content_type=None)
                    _end(seen, seen.details.get("code", "refused"))
                    return
                event = None
                async for raw in response.content:
                    line = raw.rstrip(b"\r\n")
                    if not line:
                        event = None
                    elif line.startswith(b"event:"):
                        event = line[6:].strip().decode()
                    elif line.startswith(b"data:"):
                        payload = line[5:].strip()
                        if payload == b"[DONE]":
                            _end(seen, "done")
                            return
                        if event == "error":
                            error = json.loads(payload)
                            _end(seen, error["code"], error)
                            return
                        if seen.first_at is None:
                            seen.first_at = time.monotonic()
                        seen.chunks += 1
                _end(seen, "broken")  # closed before [DONE]
        except asyncio.CancelledError:
            seen.ended = seen.ended or "hung up"
            raise
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            _end(seen, "broken", {"error": repr(exc)})

    def flowing(self) -> int:
        """Streams that have had a chunk and not ended."""
        with self._lock:
            return self.flowing_unlocked()

    def flowing_unlocked(self) -> int:
        return sum(1 for s in self.seen.values() if s.first_at is not None and s.ended is None)

    def ended(self) -> int:
        with self._lock:
            return sum(1 for s in self.seen.values() if s.ended is not None)

    def wait_flowing(self, n: int, timeout: float = 120.0) -> float:
        """Wait until `n` streams flow at once; seconds it took. Fails naming how the
        others ended if they cannot."""
        started = time.monotonic()
        while self.flowing() < n:
            if time.monotonic() - started > timeout:
                endings = Counter(
                    s.ended or ("waiting" if s.first_at is None else "flowing") for s in self.seen.values()
                )
                raise AssertionError(f"{self.flowing()} of {n} streams flowing after {timeout}s: {endings}")
            time.sleep(0.05)
        return time.monotonic() - started

    def wait_ended(self, keys, timeout: float = 30.0) -> list[Seen]:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                found = [self.seen[k] for k in keys]
            if all(s.ended is not None for s in found):
                return found
            if time.monotonic() > deadline:
                left = sum(1 for s in found if s.ended is None)
                raise AssertionError(f"{left} of {len(found)} streams had not ended after {timeout}s")
            time.sleep(0.02)


def main() -> None:
    import os
    import signal
    import sys

    url, out = sys.argv[1], sys.argv[2]
    tokens = json.load(sys.stdin)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def dump(streams: Streams) -> None:
        with streams._lock:
            state = {"flowing": streams.flowing_unlocked(), "seen": [asdict(s) for s in streams.seen.values()]}
        with open(out + ".tmp", "w") as f:
            json.dump(state, f)
        os.replace(out + ".tmp", out)

    with Streams(url) as streams:
        streams.open(tokens, spread=float(os.environ.get("STEWARD_LOAD_SPREAD", "0.002")))
        while not stop.wait(0.5):
            dump(streams)
            if streams.ended() == len(tokens):
                break
        dump(streams)


if __name__ == "__main__":
    main()
