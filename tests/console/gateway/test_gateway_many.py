"""Many streams through one gateway process (uvicorn, one event loop) at once, and a
worker that stops reading (docs/adr/0031-asgi-gateway.md).

With 200 streams flowing, a stop cuts its task's stream within a second with
TASK_STOPPED, the gateway acknowledges it, and the other 199 flow on; a revocation then
cuts every one of them within a second with AUTHZ_REVOKED, each call recorded partial.
The gateway holds no more database connections than its pool while they run.

A worker that stops reading makes the gateway stop reading the provider: the provider's
writes stall at the sockets' buffers, and the gateway's memory does not grow with the
reply. A stop then still ends that stream and the gateway still acknowledges, although
the cut cannot be delivered.
"""

from __future__ import annotations

import json
import socket
import time
import uuid

import psutil
import pytest
from django.db import connection

from runtime import states
from runtime.authz.services import grant_revoke
from runtime.models import GatewayCall
from runtime.stops.services import task_stop
from tests.console.gateway.conftest import completion_body, model_token
from tests.gateway_load import Streams
from tests.harness import wait_until
from tests.runtime.authz.common import ADMIN, give_both, running_task
from tests.stops import acks, cancelled, since_stop

pytestmark = [pytest.mark.integration, pytest.mark.serial]

ACTOR = "user:alice"
STREAMS = 200
MINUTE = " ".join(f"w{i}" for i in range(300))  # 300 chunks 0.2 s apart: a minute's reasoning


def web_connections(web) -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [f"steward:{web.pid}"])
        return cur.fetchone()[0]


def test_with_200_streams_a_stop_cuts_its_own_and_a_revocation_cuts_every_one_within_a_second(live, gateway_web, model):
    tenant = f"many-{uuid.uuid4().hex[:8]}"
    agent_grant, _ = give_both("model.call", "model:fake-1", tenant=tenant)
    tasks = [running_task(tenant=tenant) for _ in range(STREAMS)]
    keys = [f"many-{i}" for i in range(STREAMS)]
    model.set(reply=MINUTE, chunks=300, chunk_delay=0.2)
    with Streams(gateway_web.url) as streams:
        streams.open({key: model_token(t) for key, t in zip(keys, tasks, strict=True)})
        took = streams.wait_flowing(STREAMS, timeout=120)
        held = web_connections(gateway_web)
        print(f"\n{STREAMS} streams flowing after {took:.1f}s; the web process holds {held} database connections")
        assert held <= 4  # its pool (tests/conftest.py child_env: STEWARD_DB_POOL_MAX=4), whatever the streams

        # A stop reaches its own stream, and only it.
        started = task_stop(task_id=tasks[0], actor=ACTOR, reason="one of many")
        stopped = time.monotonic()
        assert started.stopping == [tasks[0]]  # the gateway carries a call of it: it must answer
        (cut,) = streams.wait_ended(keys[:1], timeout=10)
        print(f"stop: stream cut {(cut.ended_at - stopped) * 1000:.0f} ms after the stop committed")
        assert cut.ended == "TASK_STOPPED" and cut.ended_at - stopped < 1.0
        task = cancelled(tasks[0], timeout=10)
        gateway = acks(tasks[0])[states.CREDENTIAL_GATEWAY]
        assert gateway.by == "credential_gateway" and len(gateway.detail["cut"]) == 1
        assert since_stop(task, task.finished_at) < 1.0
        assert streams.flowing() == STREAMS - 1

        # A revocation reaches every other one.
        grant_revoke(grant_id=agent_grant.id, tenant=tenant, actor=ADMIN, reason="cut them all")
        revoked = time.monotonic()
        ended = streams.wait_ended(keys[1:], timeout=30)
    delays = sorted(s.ended_at - revoked for s in ended)
    print(
        f"revocation: {len(ended)} streams cut, p50 {delays[len(delays) // 2] * 1000:.0f} ms, "
        f"max {delays[-1] * 1000:.0f} ms after the revocation committed"
    )
    assert {s.ended for s in ended} == {"AUTHZ_REVOKED"}
    assert delays[-1] < 1.0
    calls = wait_until(
        lambda: (
            list(GatewayCall.objects.filter(task_id__in=tasks).values_list("outcome", "receipt"))
            if not GatewayCall.objects.filter(task_id__in=tasks, outcome="admitted").exists()
            else None
        ),
        message="every call to be recorded",
    )
    assert len(calls) == STREAMS and {o for o, _ in calls} == {"partial"}
    assert sorted(r["cut_by"] for _, r in calls).count("no_grant_agent") == STREAMS - 1


def _stalled_stream(web, token: str, key: str) -> socket.socket:
    """A stream whose worker reads the answer's head and then nothing more, with a small
    receive buffer, so what it does not read stays with the gateway."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.connect(("127.0.0.1", web.port))
    body = json.dumps(completion_body(stream=True)).encode()
    sock.sendall(
        b"POST /gateway/model/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer " + token.encode() + b"\r\nIdempotency-Key: " + key.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)  # byte by byte: nothing past the head is read
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


def _settled(read, *, quiet: float = 1.0, timeout: float = 60.0) -> int:
    """read() once it has not changed for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    last, since = read(), time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, "it never settled"
        time.sleep(0.1)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
    return last


def test_a_worker_that_stops_reading_stalls_the_provider_not_the_gateways_memory_and_a_stop_still_ends_it(
    live, gateway_web, model
):
    t = running_task()
    give_both("model.call", "model:fake-1")
    reply_bytes = 96 * 2**20
    model.set(reply="y" * reply_bytes, chunks=reply_bytes // 4096, chunk_delay=0.0)
    gateway = psutil.Process(gateway_web.pid)
    before = gateway.memory_info().rss
    sock = _stalled_stream(gateway_web, model_token(t), "stalled")
    try:
        sent = _settled(lambda: model.sent["stalled"])
        grown = gateway.memory_info().rss - before
        print(
            f"\nworker stopped reading: the provider stalled after {sent / 2**20:.1f} MiB of "
            f"{reply_bytes / 2**20:.0f} MiB; the gateway grew {grown / 2**20:.1f} MiB"
        )
        assert sent < reply_bytes / 4  # the sockets' buffers, not the reply
        assert grown < 16 * 2**20
        assert GatewayCall.objects.get(task_id=t).outcome == "admitted"

        # The cut cannot reach a worker that does not read: the stream is ended all the
        # same, its call recorded partial, and the gateway acknowledges.
        started = task_stop(task_id=t, actor=ACTOR, reason="stalled")
        assert started.stopping == [t]
        task = cancelled(t, timeout=10)
        took = since_stop(task, task.finished_at)
        print(f"stop of the stalled stream: cancelled {took * 1000:.0f} ms after the stop")
        assert took < 1.5
        call = GatewayCall.objects.get(task_id=t)
        assert (call.outcome, call.receipt["cut_by"]) == ("partial", "task_stopped")
        assert acks(t)[states.CREDENTIAL_GATEWAY].detail["cut"] == [str(call.id)]
    finally:
        sock.close()
        model.set(reply=None)
