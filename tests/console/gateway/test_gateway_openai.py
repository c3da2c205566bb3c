"""The official `openai` client (from PyPI, unchanged) against the credential gateway:
`base_url` the gateway's model route, the attempt's capability token as the API key.
The client sends no Idempotency-Key, so each call is an unkeyed effect: admitted,
attributed to the token's task and attempt, counted into the budgets and recorded with
no key; never replayed, and `unknown` when it is cut (docs/api.md, "Unkeyed calls").

The matrix: {OpenAI, AsyncOpenAI} x {stream, no stream} x {plain, a function call's
round trip, structured output}, each a real HTTP call through the web process (uvicorn)
to the fake model, streams asking for `stream_options.include_usage`."""

from __future__ import annotations

import asyncio
import json
import threading

import openai
import pytest
from django.db import connections

from runtime import states
from runtime.attempts.lease import claim_next
from runtime.authz.services import grant_revoke
from runtime.limits.services import budget_set, default_pool_name
from runtime.models import AuditEvent, GatewayCall, Task, TokenUsage
from runtime.stops.services import task_stop
from tests.console.gateway.conftest import MODEL_KEY, completion_body, model_token, model_url, post
from tests.harness import wait_until
from tests.runtime.authz.common import ADMIN, give_both, task
from tests.snapshot import snapshot
from tests.stops import acks

pytestmark = [pytest.mark.integration]

SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the notes.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query", "limit"],
            "additionalProperties": False,
        },
    },
}
CITY = {
    "type": "json_schema",
    "json_schema": {
        "name": "city",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "population": {"type": "integer"},
                "capital": {"type": "boolean"},
            },
            "required": ["name", "population", "capital"],
            "additionalProperties": False,
        },
    },
}


def claimed():
    """A task of acme allowed model.call on fake-1, claimed as a worker claims it: its
    attempt is a real row. (task id, its lease)."""
    give_both("model.call", "model:fake-1")
    t = task()
    got = claim_next(pool=default_pool_name(), worker="test")
    assert got is not None and got.lease.task_id == t
    return t, got.lease


def client(kind: str, web, token: str):
    made = openai.OpenAI if kind == "sync" else openai.AsyncOpenAI
    # max_retries=0: a retry of an unkeyed call would be a second call (docs/api.md).
    return made(base_url=web.url + "/gateway/model/v1", api_key=token, max_retries=0, timeout=30)


async def _acomplete(kind, web, token, stream, kwargs):
    async with client(kind, web, token) as c:
        if not stream:
            return _answer(await c.chat.completions.create(**kwargs))
        chunks = [
            chunk
            async for chunk in await c.chat.completions.create(
                stream=True, stream_options={"include_usage": True}, **kwargs
            )
        ]
        return _gathered(chunks)


def complete(kind: str, web, token: str, stream: bool, **kwargs) -> dict:
    """One chat completion through `openai`: {content, tool_calls, usage}."""
    kwargs = {"model": "fake-1", **kwargs}
    if kind == "async":
        return asyncio.run(_acomplete(kind, web, token, stream, kwargs))
    with client(kind, web, token) as c:
        if not stream:
            return _answer(c.chat.completions.create(**kwargs))
        return _gathered(list(c.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs)))


def _answer(completion) -> dict:
    message = completion.choices[0].message
    calls = [(t.id, t.function.name, t.function.arguments) for t in message.tool_calls or []]
    return {"content": message.content, "tool_calls": calls, "usage": completion.usage}


def _gathered(chunks) -> dict:
    """A stream's chunks put together as the openai docs show: content and each tool
    call's pieces concatenated; the usage from the last chunk (no choices)."""
    content, calls = "", {}
    for chunk in chunks:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for piece in choice.delta.tool_calls or []:
                made = calls.setdefault(piece.index, ["", "", ""])
                made[0] += piece.id or ""
                made[1] += piece.function.name or ""
                made[2] += piece.function.arguments or ""
    assert chunks[-1].choices == [] and chunks[-1].usage is not None, "include_usage: a last chunk with the usage"
    return {"content": content or None, "tool_calls": [tuple(c) for c in calls.values()], "usage": chunks[-1].usage}


def plain(kind, web, token, stream):
    answer = complete(kind, web, token, stream, messages=[{"role": "user", "content": "hello there"}])
    assert (answer["content"], answer["tool_calls"]) == ("reply: hello there", [])
    return [answer]


def tool_round_trip(kind, web, token, stream):
    asked = [{"role": "user", "content": "cats"}]
    first = complete(kind, web, token, stream, messages=asked, tools=[SEARCH])
    ((ident, name, arguments),) = first["tool_calls"]
    assert (name, json.loads(arguments), first["content"]) == ("search", {"query": "cats", "limit": 1}, None)
    said = [
        *asked,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}}],
        },
        {"role": "tool", "tool_call_id": ident, "content": "3 notes about cats"},
    ]
    second = complete(kind, web, token, stream, messages=said, tools=[SEARCH])
    assert (second["content"], second["tool_calls"]) == ("tool said: 3 notes about cats", [])
    return [first, second]


def structured(kind, web, token, stream):
    answer = complete(kind, web, token, stream, messages=[{"role": "user", "content": "Lyon"}], response_format=CITY)
    assert json.loads(answer["content"]) == {"name": "Lyon", "population": 1, "capital": True}
    return [answer]


CASES = {"plain": plain, "tool call round trip": tool_round_trip, "structured output": structured}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("stream", [False, True], ids=["no stream", "stream"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_openai_client_is_admitted_unkeyed_attributed_and_counted(live, gateway_web, model, kind, stream, case):
    t, lease = claimed()
    answers = CASES[case](kind, gateway_web, model_token(t), stream)
    calls = wait_until(
        lambda: (
            found
            if len(found := list(GatewayCall.objects.filter(task_id=t).order_by("id"))) == len(answers)
            and all(c.outcome != "admitted" for c in found)
            else None
        ),
        timeout=10,
        message="the calls to be recorded",
    )
    assert [(c.outcome, c.idempotency_key, c.attempt_id, c.epoch, c.tenant) for c in calls] == [
        ("committed", None, lease.attempt_id, lease.epoch, "acme")
    ] * len(answers)
    assert all(c.response["untrusted"] is True for c in calls)
    # Each call's usage, as the client was told it, is what the gateway counted.
    told = [a["usage"].prompt_tokens + a["usage"].completion_tokens for a in answers]
    assert [c.tokens for c in calls] == told and all(told)
    counted = TokenUsage.objects.filter(scope="task", subject=str(t))
    assert (sum(r.tokens for r in counted), sum(r.calls for r in counted)) == (sum(told), len(told))
    # The provider got the real key, and no key the caller never sent.
    seen = model.recorded()
    assert [(r["authorization"], r["idempotency_key"]) for r in seen] == [(f"Bearer {MODEL_KEY}", None)] * len(answers)
    if stream and case == "tool call round trip":
        # The stream's record pieces the function call together.
        (recorded,) = calls[0].response["body"]["choices"][0]["message"]["tool_calls"]
        assert (recorded["function"]["name"], json.loads(recorded["function"]["arguments"])) == (
            "search",
            {"query": "cats", "limit": 1},
        )


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_unkeyed_call_is_never_replayed_each_send_reaches_the_model(live, gateway_web, model, kind):
    t, _ = claimed()
    token = model_token(t)
    for _ in range(2):
        plain(kind, gateway_web, token, stream=False)
    assert len(model.recorded()) == 2
    wait_until(
        lambda: list(GatewayCall.objects.filter(task_id=t).values_list("outcome", flat=True)) == ["committed"] * 2,
        message="both calls committed",
    )


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_unkeyed_calls_spend_the_task_budget_and_then_the_client_is_refused_budget_exhausted(
    live, gateway_web, model, kind
):
    t, _ = claimed()
    budget_set(tenant="acme", actor=ADMIN, reason="test", task_tokens=8)
    token = model_token(t)
    spent = [plain(kind, gateway_web, token, stream)[0]["usage"].total_tokens for stream in (False, True)]
    assert spent == [4, 4]  # 1 prompt token and "reply: hello there", as the fake model counts
    wait_until(lambda: GatewayCall.objects.filter(task_id=t, outcome="committed").count() == 2, message="counted")
    with pytest.raises(openai.PermissionDeniedError) as refused:
        plain(kind, gateway_web, token, stream=True)
    assert refused.value.code == "BUDGET_EXHAUSTED"
    details = refused.value.body["details"]
    assert (details["boundary"], details["budget"]) == ("credential_gateway", {"scope": "task", "limit": 8, "used": 8})
    assert len(model.recorded()) == 2


def test_an_openai_call_that_sends_its_own_key_is_keyed_and_answered_from_its_record(live, gateway_web, model):
    t, _ = claimed()
    token = model_token(t)
    asked = {"messages": [{"role": "user", "content": "cats"}], "tools": [SEARCH]}
    keyed = {"extra_headers": {"Idempotency-Key": "run-1/search"}}
    first = complete("sync", gateway_web, token, False, **asked, **keyed)
    wait_until(lambda: GatewayCall.objects.filter(task_id=t, outcome="committed").exists(), message="it committed")
    # The same key, streamed this time: the recorded function call comes back as one
    # chunk, and nothing is forwarded.
    with client("sync", gateway_web, token) as c:
        chunks = list(c.chat.completions.create(model="fake-1", stream=True, **asked, **keyed))
    (piece,) = chunks[0].choices[0].delta.tool_calls
    assert (piece.id, piece.function.name, piece.function.arguments) == first["tool_calls"][0]
    assert len(model.recorded()) == 1
    assert model.recorded()[0]["idempotency_key"] == "run-1/search"
    assert sorted(GatewayCall.objects.filter(task_id=t).values_list("outcome", "idempotency_key")) == [
        ("committed", "run-1/search"),
        ("replayed", "run-1/search"),
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["no stream", "stream"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_revoked_grant_refuses_the_openai_call_naming_the_gateway(live, gateway_web, model, kind, stream):
    agent_grant, _ = give_both("model.call", "model:fake-1")
    t = task()
    claim_next(pool=default_pool_name(), worker="test")
    token = model_token(t)  # minted while the grant held
    grant_revoke(grant_id=agent_grant.id, tenant="acme", actor=ADMIN, reason="no more model calls")
    with pytest.raises(openai.PermissionDeniedError) as refused:
        plain(kind, gateway_web, token, stream)
    body = refused.value.body
    assert (refused.value.status_code, refused.value.code) == (403, "AUTHORITY_DENIED")
    assert (body["details"]["boundary"], body["details"]["reason_code"]) == ("credential_gateway", "no_grant_agent")
    call = GatewayCall.objects.get(task_id=t)
    assert (call.outcome, call.idempotency_key) == ("denied", None)
    assert AuditEvent.objects.filter(task_id=t, kind="authz.denied").count() == 1
    assert model.recorded() == []


async def _astream_until_cut(web, token, stop):
    async with client("async", web, token) as c:
        stream = await c.chat.completions.create(
            model="fake-1", messages=[{"role": "user", "content": "go"}], stream=True
        )
        async for i, _ in _counted(stream):
            if i == 1:
                # The database is sync: stop from a thread of its own, which closes its connection.
                done = threading.Thread(target=stop)
                done.start()
                await asyncio.to_thread(done.join)


async def _counted(stream):
    i = 0
    async for chunk in stream:
        yield i, chunk
        i += 1


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_stop_cuts_the_openai_stream_and_the_unkeyed_call_is_unknown(live, gateway_web, model, kind):
    t, _ = claimed()
    model.set(reply=" ".join(f"w{i}" for i in range(60)), chunks=60, chunk_delay=0.1)
    token = model_token(t)

    def stop():
        try:
            task_stop(task_id=t, actor="user:alice", reason="cut the stream")
        finally:
            if kind == "async":
                connections.close_all()  # this thread's own connection

    with pytest.raises(openai.APIError) as cut:
        if kind == "async":
            asyncio.run(_astream_until_cut(gateway_web, token, stop))
        else:
            with client("sync", gateway_web, token) as c:
                for i, _ in enumerate(
                    c.chat.completions.create(model="fake-1", messages=[{"role": "user", "content": "go"}], stream=True)
                ):
                    if i == 1:
                        stop()
    assert cut.value.code == "TASK_STOPPED"
    assert cut.value.body["code"] == "TASK_STOPPED"
    call = wait_until(
        lambda: GatewayCall.objects.filter(task_id=t).exclude(outcome="admitted").first(),
        message="the cut call to be recorded",
    )
    assert (call.outcome, call.idempotency_key, call.receipt["cut_by"]) == ("unknown", None, "task_stopped")
    assert call.tokens > 0  # what was delivered still counts
    # Cut by the stop, it is the gateway's acknowledgment's `cut` call.
    wait_until(lambda: states.CREDENTIAL_GATEWAY in acks(t), message="the gateway's acknowledgment")
    assert acks(t)[states.CREDENTIAL_GATEWAY].detail["cut"] == [str(call.id)]
    assert Task.objects.get(id=t).status in (states.STOPPING, states.CANCELLED)


def test_a_client_that_goes_away_mid_stream_leaves_its_unkeyed_call_unknown(live, gateway_web, model):
    t, _ = claimed()
    model.set(reply=" ".join(f"w{i}" for i in range(60)), chunks=60, chunk_delay=0.1)
    with client("sync", gateway_web, model_token(t)) as c:
        stream = c.chat.completions.create(model="fake-1", messages=[{"role": "user", "content": "go"}], stream=True)
        assert "".join(next(stream).choices[0].delta.content for _ in range(2)) == "w0 w1 w2"
        stream.close()  # as a worker that crashed would: the connection is gone
    call = wait_until(
        lambda: GatewayCall.objects.filter(task_id=t).exclude(outcome="admitted").first(),
        timeout=15,
        message="the abandoned call to be recorded",
    )
    assert (call.outcome, call.idempotency_key) == ("unknown", None)
    assert "cut_by" not in call.receipt and call.receipt["chunks"] >= 2


# Idempotency-Key, as sent: a missing key is an unkeyed call; a key that is sent must
# still be 1-255 printable characters (400 INVALID_IDENTIFIER, nothing written).
KEYS = {
    "missing": (None, 200),
    "empty": ("", 400),
    "huge": ("k" * 256, 400),
    "longest": ("k" * 255, 200),
    "tab": ("a\tb", 400),
    # obs-text: the HTTP server lets it through (it refuses ESC and other controls itself,
    # before the gateway), and Django reads it as Latin-1, where U+00A0 is not printable.
    "no-break space": ("a\xa0b", 400),
}


@pytest.mark.parametrize("case", list(KEYS))
def test_the_idempotency_key_as_sent(live, gateway_web, model, case):
    key, expected = KEYS[case]
    t, _ = claimed()
    before = snapshot()
    headers = {"Idempotency-Key": key} if key is not None else {}
    status, answer, _ = post(
        model_url(gateway_web), token=model_token(t), body=completion_body(), key=None, headers=headers
    )
    assert status == expected, answer
    if expected == 400:
        assert (answer["code"], answer["details"]["field"]) == ("INVALID_IDENTIFIER", "Idempotency-Key")
        assert snapshot() == before
        assert model.recorded() == []
    else:
        call = wait_until(lambda: GatewayCall.objects.filter(task_id=t).exclude(outcome="admitted").first())
        assert (call.outcome, call.idempotency_key) == ("committed", key)
