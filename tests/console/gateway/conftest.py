"""The credential gateway as it runs: the web process (uvicorn on a free port, the only
process given the provider keys), the fake model server on loopback, and helpers that
call the gateway over real HTTP as a worker would."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid

import pytest

from console.dev.demo.fake_model import FakeModel
from runtime.authz.tokens import token_mint
from runtime.gateway import MODEL_ROUTE
from tests.e2e.stack import WebServer
from tests.harness import wait_until

# The real keys exist only in this module, the web process's environment and the fake
# model; the key scan looks for them everywhere else.
MODEL_KEY = f"sk-real-model-{uuid.uuid4().hex}"
TOOL_KEY = f"tk-real-tool-{uuid.uuid4().hex}"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture(scope="session")
def fake_model():
    with FakeModel(key=MODEL_KEY, tool_key=TOOL_KEY) as model:
        yield model


@pytest.fixture(scope="session")
def gateway_web(child_env, fake_model, django_db_blocker):
    env = {
        **child_env,
        "STEWARD_MODEL_URL": fake_model.url,
        "STEWARD_MODEL_KEY": MODEL_KEY,
        "STEWARD_TOOLS": json.dumps({"echo": {"url": fake_model.tool_url, "key": TOOL_KEY}}),
    }
    web = WebServer(env).start()
    try:
        yield web.wait_ready()
    finally:
        web.stop()
        with django_db_blocker.unblock():
            _until_its_sessions_are_gone()


def _until_its_sessions_are_gone(web: WebServer | None = None) -> None:
    """Wait until the web process's database sessions have ended: the test database is
    dropped next, and DROP DATABASE waits for other sessions longer than the tests'
    statement timeout allows on a loaded machine. Given `web`, only that process's own
    sessions (console/env.py names them steward:<pid>): a second web server stopping
    while the session's stays up would otherwise wait out the timeout for sessions that
    are not its own."""
    from django.db import connection

    def alone():
        with connection.cursor() as cur:
            if web is None:
                cur.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid()"
                )
            else:
                cur.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND application_name = %s",
                    [f"steward:{web.pid}"],
                )
            return cur.fetchone()[0] == 0

    try:
        wait_until(alone, timeout=15, interval=0.1, message="the web server's database sessions to end")
    except AssertionError:
        pass  # teardown then says which sessions remain
    if web is not None:
        # The session goes on, and no DROP DATABASE follows: no checkpoint. One here writes
        # every dirty page of the server as fast as the disk allows, under the other xdist
        # worker's tests (whose flush of its own test database once outlasted its 10 s
        # statement timeout about then).
        return
    # DROP DATABASE checkpoints (PostgreSQL 15); after a suite of real processes the dirty
    # pages make that outlast the tests' statement timeout on a loaded machine, so
    # checkpoint first, without a timeout.
    with connection.cursor() as cur:
        cur.execute("SET statement_timeout = 0")
        cur.execute("CHECKPOINT")
        cur.execute("RESET statement_timeout")


@pytest.fixture
def model(fake_model):
    """The fake model with its default script, and its requests so far forgotten."""
    with fake_model.lock:
        fake_model.requests.clear()
    fake_model.set(reply=None, chunks=4, chunk_delay=0.0)
    return fake_model


def completion_body(**changes) -> dict:
    return {"model": "fake-1", "messages": [{"role": "user", "content": "hi"}], **changes}


def post(
    url: str,
    *,
    token: str | None = None,
    body=None,
    raw: bytes | None = None,
    key: str | None = "k-1",
    headers: dict | None = None,
    method: str = "POST",
    timeout: float = 30.0,
):
    """(status, JSON answer, response headers) of one gateway call. The headers are
    looked up case-insensitively, as HTTP's are (uvicorn sends their names lower-case)."""
    sent = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if key is not None:
        sent["Idempotency-Key"] = key
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, headers=sent, method=method)
    try:
        with _NO_PROXY.open(request, timeout=timeout) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read()), err.headers


def open_stream(url: str, *, token: str, body: dict, key: str | None = "k-stream"):
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=headers)
    return _NO_PROXY.open(request, timeout=30)


def events(response):
    """The SSE events of a gateway stream as (event, data) pairs, as they arrive."""
    event = None
    for raw in response:
        line = raw.decode().rstrip("\r\n")
        if not line:
            event = None
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            payload = line[5:].strip()
            yield (event or "message", payload if payload == "[DONE]" else json.loads(payload))


def until_error(stream) -> tuple[list, float | None]:
    """The events of a stream up to its terminal error, and when that came (monotonic)."""
    seen = []
    for event in stream:
        seen.append(event)
        if event[0] == "error":
            return seen, time.monotonic()
    return seen, None


def model_url(web) -> str:
    return web.url + "/gateway/model/v1/chat/completions"


def model_token(task_id, audience: str = MODEL_ROUTE, seconds: int = 300) -> str:
    return token_mint(task=task_id, audience=audience, seconds=seconds)


def ended(**match):
    """The gateway call matching `match` once it has ended: the gateway records how a
    non-streamed call ended after it has handed the answer over."""
    from runtime.models import GatewayCall

    return wait_until(
        lambda: GatewayCall.objects.filter(**match).exclude(outcome="admitted").first(),
        timeout=10,
        message=f"the gateway call {match} to end",
    )
