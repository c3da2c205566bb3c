"""POST /hooks/<id> (console/hooks/, runtime/triggers/webhooks.py): a signed delivery
becomes one task; every hostile or unsigned request is refused with its stable code and
writes nothing."""

from __future__ import annotations

import json
import time

import pytest

from runtime.models import AuditEvent, Task, WebhookDelivery
from runtime.triggers.services import webhook_create, webhook_pause
from runtime.triggers.webhooks import TOLERANCE_SECONDS, sign
from tests.harness import race

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}


@pytest.fixture
def hook(live):
    made, secret = webhook_create(name="github", agent="t.steps", **ALICE)
    return made, secret


def post(
    client,
    hook_id,
    body: bytes,
    *,
    secret: str | None,
    ts: str | None = None,
    delivery: str | None = "d-1",
    signature: str | None = None,
):
    ts = str(int(time.time())) if ts is None else ts
    headers = {"HTTP_X_STEWARD_TIMESTAMP": ts, "HTTP_X_STEWARD_DELIVERY": delivery}
    if signature is None and secret is not None:
        signature = sign(secret, ts, body)
    if signature is not None:
        headers["HTTP_X_STEWARD_SIGNATURE"] = signature
    headers = {k: v for k, v in headers.items() if v is not None}
    return client.post(f"/hooks/{hook_id}", data=body, content_type="application/json", **headers)


def test_a_signed_delivery_becomes_a_task_with_the_payload_as_input(client, hook):
    made, secret = hook
    answer = post(client, made.id, b'{"ref": "main", "n": 3}', secret=secret)
    assert answer.status_code == 202, answer.json()
    task = Task.objects.get(id=answer.json()["task_id"])
    assert task.input == {"ref": "main", "n": 3} and task.agent == "t.steps" and task.tenant == "acme"
    assert WebhookDelivery.objects.get(webhook=made).task_id == task.id
    assert AuditEvent.objects.filter(kind="webhook.delivered", task_id=task.id).count() == 1


def test_the_secret_is_stored_encrypted_not_in_the_clear(hook):
    made, secret = hook
    assert secret.encode() not in bytes(made.secret_encrypted)
    assert secret not in json.dumps(list(AuditEvent.objects.values("data")), default=str)


def test_a_replayed_delivery_is_refused_and_names_the_task_it_made(client, hook):
    made, secret = hook
    first = post(client, made.id, b'{"n": 1}', secret=secret, delivery="evt-7")
    again = post(client, made.id, b'{"n": 1}', secret=secret, delivery="evt-7")
    other_body = post(client, made.id, b'{"n": 2}', secret=secret, delivery="evt-7")
    assert first.status_code == 202
    for answer in (again, other_body):
        assert answer.status_code == 409 and answer.json()["code"] == "DELIVERY_REPLAYED"
        assert answer.json()["details"]["task_id"] == first.json()["task_id"]
    assert Task.objects.count() == 1


def test_concurrent_deliveries_of_one_id_make_one_task(hook):
    from django.test import Client

    made, secret = hook
    answers = race(4, lambda i: post(Client(), made.id, b'{"n": 1}', secret=secret, delivery="same").status_code)
    assert sorted(answers) == [202, 409, 409, 409]
    assert Task.objects.count() == 1


DEEP = b'{"a":' * 2000 + b"1" + b"}" * 2000


@pytest.mark.parametrize(
    "case, body, kw, status, code",
    [
        ("bad signature", b'{"n": 1}', {"signature": "sha256=" + "0" * 64}, 401, "SIGNATURE_INVALID"),
        ("signature of another body", b'{"n": 1}', {"sign_body": b'{"n": 2}'}, 401, "SIGNATURE_INVALID"),
        ("wrong secret", b'{"n": 1}', {"secret": "whsec_wrong"}, 401, "SIGNATURE_INVALID"),
        ("non-ascii signature", b'{"n": 1}', {"signature": "sha256=\u00e9\u00e9"}, 401, "SIGNATURE_INVALID"),
        ("missing signature", b'{"n": 1}', {"secret": None}, 401, "SIGNATURE_MISSING"),
        ("missing delivery id", b'{"n": 1}', {"delivery": None}, 401, "SIGNATURE_MISSING"),
        ("missing timestamp", b'{"n": 1}', {"ts": ""}, 401, "SIGNATURE_MISSING"),
        ("stale timestamp", b'{"n": 1}', {"ts": -TOLERANCE_SECONDS - 60}, 401, "TIMESTAMP_OUT_OF_RANGE"),
        ("future timestamp", b'{"n": 1}', {"ts": TOLERANCE_SECONDS + 60}, 401, "TIMESTAMP_OUT_OF_RANGE"),
        ("timestamp not a number", b'{"n": 1}', {"ts": "yesterday"}, 401, "TIMESTAMP_OUT_OF_RANGE"),
        ("malformed json", b'{"n": ', {}, 422, "INVALID_INPUT"),
        ("not an object", b"[1, 2]", {}, 422, "INVALID_INPUT"),
        ("wrong encoding", '{"n": "\u00e9"}'.encode("latin-1"), {}, 422, "INVALID_ENCODING"),
        ("too deep", DEEP, {}, 422, "INPUT_TOO_DEEP"),
        ("huge", b'{"s": "' + b"x" * (5 * 1024 * 1024) + b'"}', {}, 413, "INPUT_TOO_LARGE"),
        ("NUL in a string", b'{"s": "\\u0000"}', {}, 422, "INVALID_STRING"),
    ],
)
def test_a_hostile_delivery_is_refused_with_its_code_and_writes_nothing(client, hook, case, body, kw, status, code):
    made, secret = hook
    kw = dict(kw)  # the table's own dict stays as written
    if isinstance(kw.get("ts"), int):
        # Seconds from now, read when the test runs: the table is built at collection,
        # which may be many minutes before this row runs (a timestamp then in the
        # future would be inside the tolerance by now).
        kw["ts"] = str(int(time.time()) + kw["ts"])
    secret_used = kw.pop("secret", secret)
    signed_body = kw.pop("sign_body", body)
    if "signature" not in kw and secret_used is not None:
        kw.setdefault("ts", str(int(time.time())))
        kw["signature"] = sign(secret_used, kw["ts"], signed_body)
    answer = post(client, made.id, body, secret=secret_used, **kw)
    assert (answer.status_code, answer.json()["code"]) == (status, code), answer.json()
    assert not Task.objects.exists() and not WebhookDelivery.objects.exists()


def test_an_unknown_webhook_answers_like_a_bad_signature(client, live):
    answer = post(client, "01a2328d-c517-7ada-88f5-db7b23a46c29", b"{}", secret="whsec_x")
    assert (answer.status_code, answer.json()["code"]) == (401, "SIGNATURE_INVALID")
    answer = post(client, "not-a-uuid", b"{}", secret="whsec_x")
    assert (answer.status_code, answer.json()["code"]) == (401, "SIGNATURE_INVALID")


def test_a_paused_webhook_refuses_deliveries(client, hook):
    made, secret = hook
    webhook_pause(webhook_id=made.id, actor="user:alice")
    answer = post(client, made.id, b"{}", secret=secret)
    assert (answer.status_code, answer.json()["code"]) == (409, "WEBHOOK_PAUSED")


def test_get_is_not_a_delivery(client, hook):
    made, _ = hook
    assert client.get(f"/hooks/{made.id}").status_code == 405


def test_a_secret_that_no_longer_decrypts_refuses_deliveries_instead_of_failing(client, hook):
    made, secret = hook
    type(made).objects.filter(id=made.id).update(secret_encrypted=b"not a fernet token")
    answer = post(client, made.id, b"{}", secret=secret)
    assert (answer.status_code, answer.json()["code"]) == (401, "SIGNATURE_INVALID")
