"""A stream in flight when its authority goes away is cut at the next chunk, within a
second, with a terminal error event naming the gateway, and its call recorded partial;
the next request with the same token is denied on its own (tested apart)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from runtime.authz.services import grant_narrow, grant_revoke
from runtime.models import Decision, GatewayCall
from tests.console.gateway.conftest import (
    completion_body,
    events,
    model_token,
    model_url,
    open_stream,
    post,
    until_error,
)
from tests.harness import wait_until
from tests.runtime.authz.common import ADMIN, give, give_both, running_task

pytestmark = [pytest.mark.integration]

LONG = " ".join(f"w{i}" for i in range(60))  # 60 chunks 50 ms apart: a 3 s stream


def test_a_whole_stream_is_relayed_and_recorded_committed(live, gateway_web, model):
    t = running_task()
    give_both("model.call", "model:fake-1")
    model.set(reply="one two three four", chunks=4)
    with open_stream(model_url(gateway_web), token=model_token(t), body=completion_body(stream=True)) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        got = list(events(response))
    assert got[-1] == ("message", "[DONE]")
    assert "".join(d["choices"][0]["delta"]["content"] for _, d in got[:-1]) == "one two three four"
    call = GatewayCall.objects.get(task_id=t)
    assert call.outcome == "committed"
    assert call.response["body"]["choices"][0]["message"]["content"] == "one two three four"
    assert call.receipt["stream"] is True and call.response["untrusted"] is True


@pytest.mark.parametrize("change", ["revoke", "narrow"])
def test_a_grant_change_mid_stream_cuts_it_within_a_second_with_a_terminal_error(live, gateway_web, model, change):
    t = running_task()
    agent_grant, _ = give_both("model.call", "model:*")
    model.set(reply=LONG, chunks=60, chunk_delay=0.05)
    token = model_token(t)
    with open_stream(model_url(gateway_web), token=token, body=completion_body(stream=True)) as response:
        stream = events(response)
        assert next(stream)[0] == "message"  # the stream is flowing
        if change == "revoke":
            grant_revoke(grant_id=agent_grant.id, tenant="acme", actor=ADMIN, reason="cut it")
        else:
            grant_narrow(grant_id=agent_grant.id, tenant="acme", resource="model:other", actor=ADMIN, reason="cut")
        changed = time.monotonic()
        after, cut = until_error(stream)
        rest = list(stream)
    assert after and after[-1][0] == "error", after[-3:]
    assert cut - changed < 1.0
    error = after[-1][1]
    assert (error["code"], error["details"]["boundary"], error["details"]["reason_code"]) == (
        "AUTHZ_REVOKED",
        "credential_gateway",
        "no_grant_agent",
    )
    assert rest == []  # the error event is terminal: no [DONE], nothing after it
    assert not Decision.objects.get(id=error["details"]["decision_id"]).allowed
    call = wait_until(
        lambda: GatewayCall.objects.filter(task_id=t).exclude(outcome="admitted").first(), message="the call to end"
    )
    assert call.outcome == "partial"
    delivered = call.response["body"]["choices"][0]["message"]["content"]
    assert delivered and LONG.startswith(delivered) and delivered != LONG


def test_a_grant_that_expires_mid_stream_cuts_it_within_a_second_of_its_expiry(live, gateway_web, model):
    """Issue 20: an expiry moves no authz_revision, so a stream re-checked only when the
    revision moved ran on past its grant's expiry until it ended by itself."""
    t = running_task()
    expires = timezone.now() + timedelta(seconds=2)
    give("agent:t.steps", "model.call", "model:*", expires_at=expires)
    give("user:alice", "model.call", "model:*")
    reply = " ".join(f"w{i}" for i in range(100))
    model.set(reply=reply, chunks=100, chunk_delay=0.05)  # 5 s of chunks: the expiry falls inside
    with open_stream(model_url(gateway_web), token=model_token(t), body=completion_body(stream=True)) as response:
        stream = events(response)
        assert next(stream)[0] == "message"  # admitted and flowing before the expiry
        after, cut = until_error(stream)
        rest = list(stream)
    assert cut is not None and after[-1][0] == "error", f"never cut: it ended {after[-1:]}"
    cut_at = timezone.now() - timedelta(seconds=time.monotonic() - cut)
    assert (cut_at - expires).total_seconds() < 1.0
    assert len(after) > 1  # it flowed until the expiry, not cut at once
    error = after[-1][1]
    assert (error["code"], error["details"]["boundary"], error["details"]["reason_code"]) == (
        "AUTHZ_REVOKED",
        "credential_gateway",
        "grant_expired",
    )
    assert rest == []
    denial = Decision.objects.get(id=error["details"]["decision_id"])
    assert not denial.allowed and denial.at >= expires
    call = wait_until(
        lambda: GatewayCall.objects.filter(task_id=t).exclude(outcome="admitted").first(), message="the call to end"
    )
    assert call.outcome == "partial"


def test_after_a_cut_the_next_request_with_the_same_token_is_denied_before_any_stream(live, gateway_web, model):
    t = running_task()
    agent_grant, _ = give_both("model.call", "model:*")
    token = model_token(t)
    grant_revoke(grant_id=agent_grant.id, tenant="acme", actor=ADMIN, reason="gone")
    status, answer, _ = post(model_url(gateway_web), token=token, body=completion_body(stream=True))
    assert (status, answer["code"], answer["details"]["boundary"]) == (403, "AUTHORITY_DENIED", "credential_gateway")
    assert model.recorded() == []
    assert GatewayCall.objects.get(task_id=t).outcome == "denied"


def test_an_unrelated_grant_change_does_not_cut_a_stream(live, gateway_web, model):
    t = running_task()
    give_both("model.call", "model:*")
    other, _ = give_both("tool.call", "tool:*")
    model.set(reply=" ".join(f"w{i}" for i in range(10)), chunks=10, chunk_delay=0.05)
    with open_stream(model_url(gateway_web), token=model_token(t), body=completion_body(stream=True)) as response:
        stream = events(response)
        next(stream)
        grant_revoke(grant_id=other.id, tenant="acme", actor=ADMIN, reason="unrelated")
        got = list(stream)
    assert got[-1] == ("message", "[DONE]")
    assert GatewayCall.objects.get(task_id=t).outcome == "committed"
    # The revision moved, so the stream was decided again, and allowed.
    assert Decision.objects.filter(task_id=t, allowed=True).count() >= 2
