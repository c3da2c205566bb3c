"""Hostile tool paths over real HTTP (uvicorn, the fake tool on loopback), sent byte for
byte as a raw socket writes them, no client re-encoding them. With tool.call granted on
tool:echo/read/* only, the fake tool receives nothing that any server's reading
(tests/runtime/gateway/hostile.py) would put outside /tool/read/: each hostile path is
refused with TOOL_PATH_REFUSED and its reason (nothing written, nothing forwarded), or
denied and recorded, or forwarded as exactly the path it was decided on.

The web server reads the request line first (uvicorn's httptools parser), and two of its
readings come before the gateway's: a raw byte outside ASCII is refused with its own
400 (not JSON: the request never reached Django, nothing forwarded, nothing written),
and a raw `#` starts a fragment it drops, as a client would (the gateway decides and
forwards what is left: one value all the same)."""

from __future__ import annotations

import collections
import http.client
import json
import random
import socket
from urllib.parse import unquote

import pytest

from runtime.gateway import tool_route
from runtime.gateway.paths import PathRefusal
from runtime.models import Decision, GatewayCall
from tests.console.gateway.conftest import ended, model_token
from tests.runtime.authz.common import give_both, running_task
from tests.runtime.gateway.hostile import GRANTED, HOSTILE, MIXED, UNDER, outside
from tests.snapshot import snapshot

pytestmark = [pytest.mark.integration]


# What the web server makes of a request line before the gateway sees it (above).
SERVER_READS = {b"read/x#/../../write/x": "/tool/read/x"}


def refused_by_the_server(target: bytes, status: int, answer) -> bool:
    return status == 400 and answer is None and any(byte > 0x7E for byte in target)


def send(web, target: bytes, *, token: str, key: str, method: bytes = b"POST") -> tuple[int, dict | None, dict]:
    """(status, JSON answer, headers) of one call to /gateway/tools/echo/<target>, the
    request line written as these bytes; the answer is None when it is not JSON (the
    web server's own refusal)."""
    body = b"{}"
    head = (
        method + b" /gateway/tools/echo/" + target + b" HTTP/1.1\r\n"
        b"Host: 127.0.0.1:" + str(web.port).encode() + b"\r\n"
        b"Authorization: Bearer " + token.encode() + b"\r\n"
        b"Idempotency-Key: " + key.encode() + b"\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n"
        b"Connection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", web.port), timeout=30) as sock:
        sock.sendall(head + body)
        response = http.client.HTTPResponse(sock)
        response.begin()
        with response:
            raw = response.read()
            if response.getheader("Content-Type", "").startswith("application/json"):
                return response.status, json.loads(raw), response.headers
            return response.status, None, response.headers


def strays(model) -> list[str]:
    """What the fake tool received that some server would read as outside /tool/read/."""
    return [r["path"] for r in model.recorded() if outside(r["path"], UNDER)]


@pytest.fixture
def granted(live):
    """A running task whose agent and owner hold tool.call on tool:echo/read/* only, and
    its token for the echo tool."""
    task = running_task()
    give_both("tool.call", GRANTED)
    return task, model_token(task, audience=tool_route("echo"))


@pytest.mark.parametrize("what, target, expected", HOSTILE, ids=[row[0] for row in HOSTILE])
def test_a_hostile_path_reaches_the_tool_only_under_its_grant(gateway_web, model, granted, what, target, expected):
    task, token = granted
    before = snapshot()
    status, answer, headers = send(gateway_web, target, token=token, key="k-path")
    assert strays(model) == []
    expected = SERVER_READS.get(target, expected)
    if refused_by_the_server(target, status, answer):
        assert model.recorded() == []
        assert snapshot() == before
    elif expected in set(PathRefusal):
        assert (status, answer["code"], answer["details"]["reason"]) == (400, "TOOL_PATH_REFUSED", expected), answer
        assert answer["details"]["boundary"] == "credential_gateway"
        assert model.recorded() == []
        assert snapshot() == before  # nothing decided, nothing recorded
    elif expected == "denied":
        assert (status, answer["code"], answer["details"]["reason_code"]) == (403, "AUTHORITY_DENIED", "no_grant_agent")
        assert model.recorded() == []
        assert Decision.objects.get(id=answer["details"]["decision_id"]).resource == answer["details"]["resource"]
    else:
        assert status == 200, answer
        (received,) = model.recorded()
        assert received["path"] == expected
        assert answer["body"]["path"] == expected.removeprefix("/tool")
        call = ended(id=headers["Steward-Call"])
        # The one value: the resource decided on is the path the tool received, decoded.
        assert call.resource == "tool:echo" + unquote(expected.split("?")[0].removeprefix("/tool"))
        assert call.outcome == "committed"


def test_the_three_paths_of_issue_17_never_reach_the_tool(gateway_web, model, granted):
    _, token = granted
    for i, target in enumerate((b"read/..;/write/x", b"read/%252e%252e/write/x", b"read/x/..%252f..%252fwrite/x")):
        status, answer, _ = send(gateway_web, target, token=token, key=f"k-{i}")
        assert (status, answer["code"]) == (400, "TOOL_PATH_REFUSED")
    assert model.recorded() == []
    assert not GatewayCall.objects.exists()


@pytest.mark.stress
def test_many_composed_bypasses_reach_the_tool_only_under_the_grant(gateway_web, model, granted):
    """400 compositions of bypass fragments after `read/`, sent over HTTP: every call
    admitted was forwarded to a path all of whose readings lie under /tool/read/ and
    recorded with a resource under the grant; every other one reached nothing."""
    _, token = granted
    pick = random.Random(17)
    outcomes: collections.Counter = collections.Counter()
    for trial in range(400):
        target = b"read/" + b"".join(pick.choice(MIXED) for _ in range(pick.randint(1, 10)))
        seen = len(model.recorded())
        status, answer, headers = send(gateway_web, target, token=token, key=f"k-{trial}")
        arrived = model.recorded()[seen:]
        if refused_by_the_server(target, status, answer):
            assert arrived == [], target
            outcomes["400 by the server"] += 1
        elif status == 200:
            (received,) = arrived
            assert outside(received["path"], UNDER) == [], (target, received["path"])
            assert ended(id=headers["Steward-Call"]).resource.startswith("tool:echo/read/")
            outcomes["forwarded"] += 1
        else:
            assert arrived == [], (target, status, answer)
            reason = answer["details"].get("reason") or answer["details"].get("reason_code")
            assert (status, answer["code"]) in {(400, "TOOL_PATH_REFUSED"), (403, "AUTHORITY_DENIED")}, answer
            outcomes[f"{status} {reason}"] += 1
    print(dict(outcomes))
    assert strays(model) == []
    assert outcomes["forwarded"] > 0
