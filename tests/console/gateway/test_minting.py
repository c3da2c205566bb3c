"""The minting service (POST /gateway/tokens) over real HTTP, served by a real web
process: a worker gets a capability token only for an attempt its own credential holds,
on current rows, and every well-formed request is audited (docs/adr/0034-token-minting.md).

The attempts are claimed here as a worker claims them (runtime/attempts/lease.py
claim_next, under a credential), so the rows the service reads are a worker's rows."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from runtime import states
from runtime.attempts.lease import claim_next
from runtime.attempts.transitions import end_attempt
from runtime.authz.credentials import worker_credential_create, worker_credential_revoke
from runtime.authz.tokens import token_verify
from runtime.gateway import MODEL_ROUTE, tool_route
from runtime.models import AuditEvent, Task, WorkerCredential
from runtime.tasks.services import task_submit
from tests.snapshot import snapshot

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def mint(web, *, credential: str | None, body=None, raw: bytes | None = None, content_type="application/json"):
    """(status, answer) of one POST /gateway/tokens."""
    headers = {"Content-Type": content_type}
    if credential is not None:
        headers["Authorization"] = f"Bearer {credential}"
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(web.url + "/gateway/tokens", data=data, headers=headers, method="POST")
    try:
        with _NO_PROXY.open(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read())


def claimed(settings, credential: str, *, tenant: str = "acme", owner: str = "user:alice"):
    """A task of `tenant`, claimed as the worker holding `credential` claims it: (task id, epoch)."""
    made = task_submit(agent="t.steps", input={}, tenant=tenant, owner=owner, actor=owner).task_id
    settings.STEWARD = {**settings.STEWARD, "WORKER_CREDENTIAL": credential}
    try:
        claim = claim_next(pool=Task.objects.get(id=made).pool_id, worker=f"test:{credential[4:12]}")
    finally:
        settings.STEWARD = {**settings.STEWARD, "WORKER_CREDENTIAL": None}
    assert claim is not None and claim.lease.task_id == made
    return claim.lease


def ask(lease, audience: str = MODEL_ROUTE, **changes) -> dict:
    return {"task": str(lease.task_id), "epoch": lease.epoch, "audience": audience, **changes}


def events(kind: str, task_id=None):
    found = AuditEvent.objects.filter(kind=kind)
    return list(found.filter(task_id=task_id) if task_id is not None else found)


@pytest.fixture
def workers(live):
    """Two workers' credentials, a and b, as the CLI makes them."""
    return {name: worker_credential_create(name=f"worker-{name}", actor="user:dave").secret for name in ("a", "b")}


def test_a_worker_gets_a_token_for_the_attempt_it_holds_and_the_mint_is_audited(live, gateway_web, settings, workers):
    lease = claimed(settings, workers["a"])
    status, answer = mint(gateway_web, credential=workers["a"], body=ask(lease))
    assert status == 200, answer
    assert (answer["epoch"], answer["audience"], answer["expires_in"]) == (lease.epoch, MODEL_ROUTE, 300)
    claims = token_verify(answer["token"], audience=MODEL_ROUTE)
    assert (claims["task"], claims["epoch"], claims["tenant"]) == (str(lease.task_id), lease.epoch, "acme")
    (minted,) = events("capability.minted", lease.task_id)
    ident = workers["a"].split(".")[1]
    assert minted.actor == f"worker_credential:{ident}" and minted.tenant == "acme"
    assert minted.data["epoch"] == lease.epoch and minted.data["audience"] == MODEL_ROUTE
    used = WorkerCredential.objects.get(id=ident)
    assert used.uses == 1 and used.last_used_at is not None
    # A tool's route is an audience too; each mint is one more use, one more event.
    status, _ = mint(gateway_web, credential=workers["a"], body=ask(lease, tool_route("echo")))
    assert status == 200
    assert WorkerCredential.objects.get(id=ident).uses == 2
    assert len(events("capability.minted", lease.task_id)) == 2


def _no_credential(web, workers, lease):
    return mint(web, credential=None, body=ask(lease))


def _bad_secret(web, workers, lease):
    prefix, ident, secret = workers["a"].split(".")
    return mint(web, credential=f"{prefix}.{ident}.{'A' * len(secret)}", body=ask(lease))


def _unknown_id(web, workers, lease):
    _, _, secret = workers["a"].split(".")
    return mint(web, credential=f"swc.{'0' * 16}.{secret}", body=ask(lease))


def _revoked(web, workers, lease):
    worker_credential_revoke(credential=workers["a"].split(".")[1], actor="user:dave", reason="test")
    return mint(web, credential=workers["a"], body=ask(lease))


def _another_workers_attempt(web, workers, lease):
    return mint(web, credential=workers["b"], body=ask(lease))


def _stale_epoch(web, workers, lease):
    # The attempt yields (a database error), the same worker claims the task again: the
    # first attempt's epoch is stale, whoever asks with it.
    end_attempt(lease, states.TaskEvent.YIELD, note="test", error={"code": "INFRASTRUCTURE"})
    return mint(web, credential=workers["a"], body=ask(lease, epoch=lease.epoch + 1))


def _finished_task(web, workers, lease):
    end_attempt(lease, states.TaskEvent.COMPLETE, output="{}")
    return mint(web, credential=workers["a"], body=ask(lease))


def _wrong_audience(web, workers, lease):
    return mint(web, credential=workers["a"], body=ask(lease, "api:v1/grants"))


# What each refusal answers: (status, code, details.reason).
REFUSED = {
    "no credential": (_no_credential, (401, "WORKER_CREDENTIAL_REFUSED", "missing"), False),
    "bad secret": (_bad_secret, (401, "WORKER_CREDENTIAL_REFUSED", "unknown"), True),
    "unknown credential": (_unknown_id, (401, "WORKER_CREDENTIAL_REFUSED", "unknown"), True),
    "revoked credential": (_revoked, (401, "WORKER_CREDENTIAL_REFUSED", "revoked"), True),
    "another worker's attempt": (_another_workers_attempt, (403, "TOKEN_REFUSED", "not_your_attempt"), True),
    "a future epoch": (_stale_epoch, (403, "TOKEN_REFUSED", "stale_epoch"), True),
    "a finished task": (_finished_task, (403, "TOKEN_REFUSED", "no_live_attempt"), True),
    "wrong audience": (_wrong_audience, (403, "TOKEN_REFUSED", "wrong_audience"), True),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_each_refusal_has_its_stable_code_and_a_well_formed_one_is_audited(live, gateway_web, settings, workers, case):
    lease = claimed(settings, workers["a"])
    ask_it, expected, audited = REFUSED[case]
    status, answer = ask_it(gateway_web, workers, lease)
    assert (status, answer["code"], answer["details"]["reason"]) == expected
    assert "token" not in answer and answer["details"]["boundary"] == "credential_gateway"
    refused = events("capability.refused")
    assert [e.data["reason"] for e in refused] == ([expected[2]] if audited else [])
    assert events("capability.minted") == []
    assert set(WorkerCredential.objects.values_list("uses", flat=True)) == {0}


def test_the_epoch_before_a_new_attempt_is_stale_even_for_the_worker_that_holds_the_new_one(
    live, gateway_web, settings, workers
):
    first = claimed(settings, workers["a"])
    end_attempt(first, states.TaskEvent.YIELD, note="test", error={"code": "INFRASTRUCTURE"})
    settings.STEWARD = {**settings.STEWARD, "WORKER_CREDENTIAL": workers["a"]}
    second = claim_next(pool=Task.objects.get(id=first.task_id).pool_id, worker="test:a").lease
    assert second.epoch == first.epoch + 1
    status, answer = mint(gateway_web, credential=workers["a"], body=ask(first))
    assert (status, answer["details"]["reason"]) == (403, "stale_epoch")
    status, answer = mint(gateway_web, credential=workers["a"], body=ask(second))
    assert status == 200 and token_verify(answer["token"], audience=MODEL_ROUTE)["epoch"] == second.epoch


def test_another_tenants_task_held_by_another_worker_gets_no_token(live, gateway_web, settings, workers):
    ours = claimed(settings, workers["a"])
    theirs = claimed(settings, workers["b"], tenant="globex", owner="user:carol")
    status, answer = mint(gateway_web, credential=workers["a"], body=ask(theirs))
    assert (status, answer["code"], answer["details"]["reason"]) == (403, "TOKEN_REFUSED", "not_your_attempt")
    # Nor with its own attempt's epoch, whichever epoch it tries.
    status, answer = mint(gateway_web, credential=workers["a"], body=ask(theirs, epoch=ours.epoch))
    assert status == 403
    (refusal, _) = events("capability.refused", theirs.task_id)
    assert refusal.tenant == "globex"  # on the task's own chain, in its tenant's trail


def test_a_dense_worker_gets_tokens_for_each_of_its_attempts_under_its_one_credential(
    live, gateway_web, settings, workers
):
    leases = [claimed(settings, workers["a"]) for _ in range(3)]
    for lease in leases:
        status, answer = mint(gateway_web, credential=workers["a"], body=ask(lease))
        assert status == 200 and token_verify(answer["token"], audience=MODEL_ROUTE)["task"] == str(lease.task_id)
        assert mint(gateway_web, credential=workers["b"], body=ask(lease))[0] == 403


BIG = 5000
HOSTILE = {
    "too large": (b'{"task": "' + b"a" * BIG + b'"}', "application/json", (413, "INPUT_TOO_LARGE")),
    "megabytes": (b"[" * (3 * 1024 * 1024), "application/json", (413, "INPUT_TOO_LARGE")),
    "not json": (b'{"task": ', "application/json", (422, "INVALID_INPUT")),
    "latin-1": (
        '{"task": "caf\u00e9", "epoch": 1, "audience": "x"}'.encode("latin-1"),
        "application/json",
        (422, "INVALID_ENCODING"),
    ),
    "not an object": (b"[1, 2, 3]", "application/json", (422, "INVALID_INPUT")),
    "deep": (b"[" * 200 + b"]" * 200, "application/json", (422, "INPUT_TOO_DEEP")),
    "NaN epoch": (b'{"task": "T", "epoch": NaN, "audience": "A"}', "application/json", (422, "NUMBER_OUT_OF_RANGE")),
    "missing field": (b'{"task": "T", "epoch": 1}', "application/json", (400, "INVALID_ARGUMENT")),
    "extra field": (
        b'{"task": "T", "epoch": 1, "audience": "A", "tenant": "acme"}',
        "application/json",
        (400, "INVALID_ARGUMENT"),
    ),
    "form encoded": (b"task=T&epoch=1", "application/x-www-form-urlencoded", (400, "INVALID_ARGUMENT")),
    "task not a uuid": (
        b'{"task": "../../etc", "epoch": 1, "audience": "A"}',
        "application/json",
        (404, "TASK_NOT_FOUND"),
    ),
    "task a number": (b'{"task": 7, "epoch": 1, "audience": "A"}', "application/json", (404, "TASK_NOT_FOUND")),
    "epoch zero": (b'{"task": "T", "epoch": 0, "audience": "A"}', "application/json", (400, "ARGUMENT_OUT_OF_RANGE")),
    "epoch negative": (
        b'{"task": "T", "epoch": -1, "audience": "A"}',
        "application/json",
        (400, "ARGUMENT_OUT_OF_RANGE"),
    ),
    "epoch past int4": (
        b'{"task": "T", "epoch": 2147483648, "audience": "A"}',
        "application/json",
        (400, "ARGUMENT_OUT_OF_RANGE"),
    ),
    "epoch huge": (
        b'{"task": "T", "epoch": ' + b"9" * 5000 + b', "audience": "A"}',
        "application/json",
        (413, "INPUT_TOO_LARGE"),
    ),
    "epoch a float": (
        b'{"task": "T", "epoch": 1.5, "audience": "A"}',
        "application/json",
        (400, "ARGUMENT_OUT_OF_RANGE"),
    ),
    "epoch a string": (
        b'{"task": "T", "epoch": "1", "audience": "A"}',
        "application/json",
        (400, "ARGUMENT_OUT_OF_RANGE"),
    ),
    "epoch a bool": (
        b'{"task": "T", "epoch": true, "audience": "A"}',
        "application/json",
        (400, "ARGUMENT_OUT_OF_RANGE"),
    ),
    "audience control": (
        b'{"task": "T", "epoch": 1, "audience": "a\\u0000b"}',
        "application/json",
        (422, "INVALID_STRING"),  # as on the model routes: \u0000 is refused in any field
    ),
    "audience too long": (
        b'{"task": "T", "epoch": 1, "audience": "' + b"a" * 201 + b'"}',
        "application/json",
        (400, "INVALID_IDENTIFIER"),
    ),
    "audience a list": (
        b'{"task": "T", "epoch": 1, "audience": ["A"]}',
        "application/json",
        (400, "INVALID_IDENTIFIER"),
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_bodies_are_refused_with_a_stable_code_and_write_nothing(live, gateway_web, settings, workers, case):
    lease = claimed(settings, workers["a"])
    raw, kind, expected = HOSTILE[case]
    raw = raw.replace(b'"T"', f'"{lease.task_id}"'.encode()).replace(b'"A"', f'"{MODEL_ROUTE}"'.encode())
    before = snapshot()
    status, answer = mint(gateway_web, credential=workers["a"], raw=raw, content_type=kind)
    assert (status, answer["code"]) == expected, answer
    assert set(answer) == {"code", "message", "details"}
    assert snapshot() == before


CREDENTIALS = {
    "no scheme": "swc.0123456789abcdef.x",
    "basic": "Basic dXNlcjpwYXNz",
    "not ours": "Bearer eyJhbGciOiJFZERTQSJ9.e30.c2ln",
    "short secret": "Bearer swc.0123456789abcdef.abc",
    "upper id": "Bearer swc.0123456789ABCDEF." + "a" * 43,
    "non-ascii": "Bearer swc.0123456789abcdef." + "\u00e9" * 43,
    "huge": "Bearer swc." + "a" * 9000,
}


@pytest.mark.parametrize("case", list(CREDENTIALS))
def test_a_malformed_credential_is_refused_401_and_writes_nothing(live, gateway_web, settings, workers, case):
    lease = claimed(settings, workers["a"])
    header = CREDENTIALS[case]
    before = snapshot()
    request = urllib.request.Request(
        gateway_web.url + "/gateway/tokens",
        data=json.dumps(ask(lease)).encode(),
        headers={"Content-Type": "application/json", "Authorization": header.encode("utf-8").decode("latin-1")},
        method="POST",
    )
    try:
        with _NO_PROXY.open(request, timeout=30) as response:
            status, answer = response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        with err:
            status, answer = err.code, json.loads(err.read())
    assert (status, answer["code"]) == (401, "WORKER_CREDENTIAL_REFUSED")
    assert answer["details"]["reason"] in ("missing", "malformed")
    assert snapshot() == before


def test_the_workers_client_caches_per_audience_and_keeps_one_connection(live, gateway_web, settings, workers, capsys):
    """runtime/gateway/client.py token(): one round trip per attempt and audience, over a
    kept-alive connection; a refusal becomes what the attempt does about it."""
    import statistics
    import time
    from types import SimpleNamespace

    from runtime.errors import CapabilityRefused, Fenced
    from runtime.gateway import client

    lease = claimed(settings, workers["a"])
    settings.STEWARD = {**settings.STEWARD, "WORKER_CREDENTIAL": workers["a"], "GATEWAY_URL": gateway_web.url}
    ctx = SimpleNamespace(task_id=lease.task_id, epoch=lease.epoch)
    first = client.token(ctx, MODEL_ROUTE)
    connection = client._minting.held[1]
    assert client.token(ctx, MODEL_ROUTE) == first  # cached: no request
    assert client.token(ctx, tool_route("echo")) != first
    assert client._minting.held[1] is connection  # the same kept-alive connection
    assert WorkerCredential.objects.get(id=workers["a"].split(".")[1]).uses == 2
    took = []
    for _ in range(30):
        started = time.perf_counter()
        status, _ = client._mint_request(ask(lease))
        took.append((time.perf_counter() - started) * 1000)
        assert status == 200
    assert client._minting.held[1] is connection
    with capsys.disabled():
        print(f"\nmint round trip over a kept-alive connection: p50 {statistics.median(took):.1f} ms")
    with pytest.raises(Fenced):
        client.token(SimpleNamespace(task_id=lease.task_id, epoch=lease.epoch + 1), MODEL_ROUTE)
    settings.STEWARD = {**settings.STEWARD, "WORKER_CREDENTIAL": None}
    with pytest.raises(CapabilityRefused):
        client.token(SimpleNamespace(task_id=lease.task_id, epoch=lease.epoch), MODEL_ROUTE)
    client._minting.held[1].close()  # the test thread's: a worker's lives as long as its thread
