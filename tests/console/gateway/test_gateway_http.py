"""The credential gateway over real HTTP (uvicorn, the fake model on loopback): each
token misuse is refused naming why, attribution comes from the token alone, authority is
current rows, hostile bodies are refused with stable codes and write nothing, and a
committed key is answered from its record."""

from __future__ import annotations

import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from django.db.models import F

from runtime.authz.services import grant_narrow, grant_revoke
from runtime.gateway import MODEL_ROUTE, tool_route
from runtime.models import Decision, GatewayCall, Task
from tests.console.gateway.conftest import (
    MODEL_KEY,
    TOOL_KEY,
    completion_body,
    ended,
    events,
    model_token,
    model_url,
    open_stream,
    post,
)
from tests.console.test_dev_secrets import published_capability_pem
from tests.runtime.authz.common import ADMIN, AGENT, OWNER, give_both, running_task
from tests.runtime.authz.test_tokens import claims_of, signed, tampered
from tests.snapshot import snapshot

pytestmark = [pytest.mark.integration]

MODEL = "model:fake-1"


def allowed_task(tenant: str = "acme"):
    t = running_task(tenant=tenant, owner=OWNER if tenant == "acme" else "user:carol")
    give_both("model.call", MODEL, tenant=tenant, owner=OWNER if tenant == "acme" else "user:carol")
    return t


# Each misuse, the token it sends, and the reason the gateway names (401, nothing written).
MISUSE = {
    "wrong audience": (lambda t: model_token(t, audience=tool_route("echo")), "wrong_audience"),
    "expired": (lambda t: signed(claims_of(t, aud=MODEL_ROUTE, exp=int(time.time()) - 5)), "expired"),
    "not yet valid": (lambda t: signed(claims_of(t, aud=MODEL_ROUTE, nbf=int(time.time()) + 120)), "not_yet_valid"),
    "signed with another key": (
        lambda t: signed(claims_of(t, aud=MODEL_ROUTE), key=Ed25519PrivateKey.generate()),
        "bad_signature",
    ),
    # What debug once derived from the secret key it fell back to, a constant published in
    # console/settings.py: every `make run` gateway accepted it (tests/console/test_dev_secrets.py).
    "signed with the key of the published debug constant": (
        lambda t: signed(claims_of(t, aud=MODEL_ROUTE), key=load_pem_private_key(published_capability_pem(), None)),
        "bad_signature",
    ),
    "claims edited after signing": (lambda t: tampered(model_token(t), tenant="globex"), "bad_signature"),
    "not a token": (lambda t: "not-a-jwt", "malformed"),
    "alg none": (lambda t: jwt.encode(claims_of(t, aud=MODEL_ROUTE), None, algorithm="none"), "bad_signature"),
    "a claim missing": (
        lambda t: signed({k: v for k, v in claims_of(t, aud=MODEL_ROUTE).items() if k != "epoch"}),
        "malformed",
    ),
}


@pytest.mark.parametrize("misuse", list(MISUSE))
def test_each_token_misuse_is_refused_401_naming_why_and_writes_nothing(live, gateway_web, model, misuse):
    t = allowed_task()
    make, reason = MISUSE[misuse]
    token = make(t)
    before = snapshot()
    status, answer, _ = post(model_url(gateway_web), token=token, body=completion_body())
    assert (status, answer["code"], answer["details"]["reason"]) == (401, "CAPABILITY_REFUSED", reason)
    assert answer["details"]["boundary"] == "credential_gateway"
    assert snapshot() == before
    assert model.recorded() == []


def test_no_token_at_all_is_refused_401(live, gateway_web, model):
    status, answer, _ = post(model_url(gateway_web), body=completion_body())
    assert (status, answer["code"], answer["details"]["reason"]) == (401, "CAPABILITY_REFUSED", "malformed")
    assert model.recorded() == []


def test_a_permitted_call_reaches_the_model_with_the_real_key_and_is_recorded(live, gateway_web, model):
    t = allowed_task()
    status, answer, headers = post(
        model_url(gateway_web),
        token=model_token(t),
        body=completion_body(),
        key="t/3/model",
        headers={"Steward-Step": "3"},
    )
    assert status == 200
    assert answer["choices"][0]["message"]["content"] == "reply: hi"
    (sent,) = model.recorded()
    assert sent["authorization"] == f"Bearer {MODEL_KEY}"
    assert sent["idempotency_key"] == "t/3/model"
    call = ended(id=headers["Steward-Call"])
    assert (
        call.task_id,
        call.tenant,
        call.epoch,
        call.step_seq,
        call.route,
        call.action,
        call.resource,
        call.outcome,
        call.idempotency_key,
    ) == (t, "acme", 0, 3, MODEL_ROUTE, "model.call", MODEL, "committed", "t/3/model")
    assert call.receipt == {"id": answer["id"], "status": 200, "model": "fake-1"}
    assert call.response["untrusted"] is True and call.response["source"] == MODEL
    assert MODEL_KEY not in str(call.receipt) + str(call.response)
    decision = Decision.objects.get(id=headers["Steward-Decision"])
    assert (decision.allowed, decision.boundary, decision.actor) == (True, "credential_gateway", f"agent:{AGENT}")


def test_a_committed_key_is_answered_from_its_record_without_calling_the_model_again(live, gateway_web, model):
    t = allowed_task()
    token = model_token(t)
    first = post(model_url(gateway_web), token=token, body=completion_body(), key="same")
    ended(id=first[2]["Steward-Call"])
    again = post(model_url(gateway_web), token=token, body=completion_body(), key="same")
    assert (first[0], again[0]) == (200, 200)
    assert again[1] == first[1]
    assert again[2].get("Steward-Replayed") == "1"
    assert len(model.recorded()) == 1
    assert sorted(GatewayCall.objects.filter(task_id=t).values_list("outcome", flat=True)) == ["committed", "replayed"]


def test_attribution_in_headers_or_body_is_ignored_the_token_decides(live, gateway_web, model):
    t = allowed_task()
    other = allowed_task("globex")
    forged_headers = {
        "X-Steward-Tenant": "globex",
        "X-Steward-Actor": "user:carol",
        "X-Steward-Task": str(other),
        "Steward-Tenant": "globex",
    }
    body = completion_body(tenant="globex", actor="user:carol", task=str(other), owner="user:carol", user="user:carol")
    status, _, headers = post(model_url(gateway_web), token=model_token(t), body=body, headers=forged_headers)
    assert status == 200
    call = GatewayCall.objects.get(id=headers["Steward-Call"])
    decision = Decision.objects.get(id=headers["Steward-Decision"])
    assert (call.tenant, call.task_id) == ("acme", t)
    assert (decision.tenant, decision.task_id, decision.actor, decision.owner) == ("acme", t, f"agent:{AGENT}", OWNER)
    assert not GatewayCall.objects.filter(task_id=other).exists()
    assert not Decision.objects.filter(task_id=other).exists()


def test_forged_attribution_without_authority_is_denied_in_the_tokens_own_tenant(live, gateway_web, model):
    t = running_task()  # acme, no grants; globex grants model.call to everyone who asks there
    allowed_task("globex")
    status, answer, _ = post(
        model_url(gateway_web),
        token=model_token(t),
        body=completion_body(tenant="globex"),
        headers={"X-Steward-Tenant": "globex"},
    )
    assert (status, answer["code"], answer["details"]["boundary"], answer["details"]["reason_code"]) == (
        403,
        "AUTHORITY_DENIED",
        "credential_gateway",
        "no_grant_agent",
    )
    assert Decision.objects.get(id=answer["details"]["decision_id"]).tenant == "acme"
    assert model.recorded() == []


def test_a_tenant_a_token_naming_tenant_b_is_denied_at_tenant_isolation(live, gateway_web, model):
    t = allowed_task()
    allowed_task("globex")
    token = signed(claims_of(t, aud=MODEL_ROUTE, tenant="globex"))  # signed with the real key: a leaked signer
    status, answer, _ = post(model_url(gateway_web), token=token, body=completion_body())
    assert (status, answer["code"], answer["details"]["boundary"], answer["details"]["reason_code"]) == (
        403,
        "AUTHORITY_DENIED",
        "tenant_isolation",
        "tenant_mismatch",
    )
    assert set(answer["details"]) >= {"decision_id", "policy_version", "authz_revision"}
    assert model.recorded() == []


def test_a_superseded_attempts_token_is_denied(live, gateway_web, model):
    t = allowed_task()
    token = model_token(t)
    Task.objects.filter(id=t).update(epoch=F("epoch") + 1)  # a newer attempt took the task over
    status, answer, _ = post(model_url(gateway_web), token=token, body=completion_body())
    assert (status, answer["details"]["boundary"], answer["details"]["reason_code"]) == (
        403,
        "credential_gateway",
        "superseded_attempt",
    )
    assert model.recorded() == []


@pytest.mark.parametrize("change", ["revoke", "narrow"])
def test_a_token_minted_before_a_grant_change_is_denied_on_replay_naming_the_gateway(live, gateway_web, model, change):
    t = running_task()
    agent_grant, _ = give_both("model.call", "model:*")
    token = model_token(t)
    assert post(model_url(gateway_web), token=token, body=completion_body(), key="before")[0] == 200
    if change == "revoke":
        grant_revoke(grant_id=agent_grant.id, tenant="acme", actor=ADMIN, reason="test")
    else:
        grant_narrow(grant_id=agent_grant.id, tenant="acme", resource="model:other", actor=ADMIN, reason="test")
    status, answer, _ = post(model_url(gateway_web), token=token, body=completion_body(), key="after")
    assert (status, answer["code"], answer["details"]["boundary"], answer["details"]["reason_code"]) == (
        403,
        "AUTHORITY_DENIED",
        "credential_gateway",
        "no_grant_agent",
    )
    assert (
        answer["details"]["authz_revision"] > jwt.decode(token, options={"verify_signature": False})["authz_revision"]
    )
    assert len(model.recorded()) == 1
    # The same token replaying the committed key is denied too: authority first, record second.
    status, _, _ = post(model_url(gateway_web), token=token, body=completion_body(), key="before")
    assert status == 403


HOSTILE = {
    "huge": (
        b'{"model": "fake-1", "messages": [{"role": "user", "content": "' + b"x" * (2 * 1024 * 1024) + b'"}]}',
        {"application/json"},
        (413, "INPUT_TOO_LARGE"),
    ),
    "deep": (
        b'{"model": "fake-1", "messages": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        {"application/json"},
        (422, "INPUT_TOO_DEEP"),
    ),
    "malformed": (b'{"model": "fake-1", "messages": [', {"application/json"}, (422, "INVALID_INPUT")),
    "latin-1": (
        '{"model": "fake-1", "messages": [{"role": "user", "content": "caf\u00e9"}]}'.encode("latin-1"),
        {"application/json"},
        (422, "INVALID_ENCODING"),
    ),
    "NaN": (
        b'{"model": "fake-1", "messages": [{"role": "user", "content": NaN}]}',
        {"application/json"},
        (422, "NUMBER_OUT_OF_RANGE"),
    ),
    "nul": (
        b'{"model": "fake-1", "messages": [{"role": "user", "content": "a\\u0000b"}]}',
        {"application/json"},
        (422, "INVALID_STRING"),
    ),
    "not an object": (b"[1, 2]", {"application/json"}, (422, "INVALID_INPUT")),
    "no messages": (b'{"model": "fake-1"}', {"application/json"}, (400, "INVALID_ARGUMENT")),
    "model not a name": (b'{"model": 7, "messages": [{}]}', {"application/json"}, (400, "INVALID_ARGUMENT")),
    "stream not a bool": (
        b'{"model": "m", "messages": [{}], "stream": "yes"}',
        {"application/json"},
        (400, "INVALID_ARGUMENT"),
    ),
    "form encoded": (b"model=fake-1", {"application/x-www-form-urlencoded"}, (400, "INVALID_ARGUMENT")),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_bodies_are_refused_with_a_stable_code_and_write_nothing(live, gateway_web, model, case):
    t = allowed_task()
    raw, (kind,), expected = HOSTILE[case]
    before = snapshot()
    status, answer, _ = post(model_url(gateway_web), token=model_token(t), raw=raw, headers={"Content-Type": kind})
    assert (status, answer["code"]) == expected
    assert set(answer) == {"code", "message", "details"}
    assert snapshot() == before
    assert model.recorded() == []


def test_an_unkeyed_stream_cut_by_a_revocation_is_recorded_unknown_not_partial(live, gateway_web, model):
    # A call without an Idempotency-Key is admitted unkeyed (the key table, and the
    # official client's matrix, are tests/console/gateway/test_gateway_openai.py).
    t = running_task()
    agent_grant, _ = give_both("model.call", "model:*")
    model.set(reply=" ".join(f"w{i}" for i in range(60)), chunks=60, chunk_delay=0.1)
    stream_body = completion_body(stream=True)
    with open_stream(model_url(gateway_web), token=model_token(t), body=stream_body, key=None) as response:
        stream = events(response)
        assert next(stream)[0] == "message"
        grant_revoke(grant_id=agent_grant.id, tenant="acme", actor=ADMIN, reason="cut it")
        last = [event for event in stream][-1]
    assert (last[0], last[1]["code"], last[1]["error"]["code"]) == ("error", "AUTHZ_REVOKED", "AUTHZ_REVOKED")
    call = ended(task_id=t)
    assert (call.outcome, call.idempotency_key, call.receipt["cut_by"]) == ("unknown", None, "no_grant_agent")
    assert model.recorded()[0]["idempotency_key"] is None


def test_a_tool_call_gets_the_tool_key_injected_and_its_answer_recorded_untrusted(live, gateway_web, model):
    t = running_task()
    give_both("tool.call", "tool:echo/notes/*")
    url = gateway_web.url + "/gateway/tools/echo/notes/today?x=1"
    status, answer, headers = post(
        url,
        token=model_token(t, audience=tool_route("echo")),
        body={"text": "hi"},
        headers={"Authorization-Forged": "x"},
    )
    assert status == 200
    assert answer["status"] == 200 and answer["body"]["json"] == {"text": "hi"}
    assert answer["body"]["path"] == "/notes/today?x=1"
    (sent,) = model.recorded()
    assert sent["authorization"] == f"Bearer {TOOL_KEY}"
    call = ended(id=headers["Steward-Call"])
    assert (call.action, call.resource, call.outcome, call.response["untrusted"]) == (
        "tool.call",
        "tool:echo/notes/today",
        "committed",
        True,
    )
    # Outside the granted prefix: denied, nothing forwarded.
    status, answer, _ = post(
        gateway_web.url + "/gateway/tools/echo/admin/keys",
        key="k-2",
        token=model_token(t, audience=tool_route("echo")),
        body={},
    )
    assert (status, answer["details"]["boundary"], answer["details"]["reason_code"]) == (
        403,
        "credential_gateway",
        "no_grant_agent",
    )
    assert len(model.recorded()) == 1


@pytest.mark.parametrize(
    "path, reason",
    [("notes/../admin", "dot_segment"), ("notes//x", "empty_segment"), ("notes/%2e%2e/admin", "dot_segment")],
)
def test_a_tool_path_that_climbs_out_is_refused(live, gateway_web, model, path, reason):
    # The full table of hostile paths is tests/console/gateway/test_gateway_paths.py.
    t = running_task()
    give_both("tool.call", "tool:echo/*")
    status, answer, _ = post(
        gateway_web.url + f"/gateway/tools/echo/{path}", body={}, token=model_token(t, audience=tool_route("echo"))
    )
    assert (status, answer["code"], answer["details"]["reason"]) == (400, "TOOL_PATH_REFUSED", reason), answer
    assert model.recorded() == []


def test_an_unknown_tool_is_404_unknown_tool(live, gateway_web, model):
    t = running_task()
    status, answer, _ = post(
        gateway_web.url + "/gateway/tools/nosuch/x", body={}, token=model_token(t, audience=tool_route("nosuch"))
    )
    assert (status, answer["code"]) == (404, "UNKNOWN_TOOL")


def test_a_key_whose_first_send_is_still_in_flight_is_refused_409_and_not_forwarded(live, gateway_web, model):
    t = allowed_task()
    token = model_token(t)
    model.set(reply=" ".join(f"w{i}" for i in range(20)), chunks=20, chunk_delay=0.05)
    with open_stream(model_url(gateway_web), token=token, body=completion_body(stream=True), key="twice") as first:
        stream = events(first)
        next(stream)
        status, answer, _ = post(model_url(gateway_web), token=token, body=completion_body(), key="twice")
        assert (status, answer["code"]) == (409, "CALL_IN_FLIGHT")
        assert list(stream)[-1] == ("message", "[DONE]")
    assert len(model.recorded()) == 1
    assert sorted(GatewayCall.objects.filter(task_id=t).values_list("outcome", flat=True)) == ["busy", "committed"]
    # Once the first has committed, the key is answered from its record.
    status, _, headers = post(model_url(gateway_web), token=token, body=completion_body(), key="twice")
    assert (status, headers.get("Steward-Replayed")) == (200, "1")
    assert len(model.recorded()) == 1


@pytest.mark.parametrize("case", ["huge", "deep", "malformed", "latin-1", "nul"])
def test_hostile_bodies_to_a_tool_are_refused_the_same_way_and_write_nothing(live, gateway_web, model, case):
    t = running_task()
    give_both("tool.call", "tool:echo/*")
    raw, _, expected = HOSTILE[case]
    before = snapshot()
    status, answer, _ = post(
        gateway_web.url + "/gateway/tools/echo/notes", raw=raw, token=model_token(t, audience=tool_route("echo"))
    )
    assert (status, answer["code"]) == expected
    assert snapshot() == before
    assert model.recorded() == []
