"""Capability tokens prove identity and nothing more: each misuse is refused naming why,
and a token that verifies still gets only what current rows allow."""

from __future__ import annotations

import base64
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.exceptions import ImproperlyConfigured

from console import env
from runtime.authz.selectors import authz_revision
from runtime.authz.services import grant_revoke
from runtime.authz.tokens import CLAIMS, token_authorize, token_mint, token_verify
from runtime.errors import CapabilityRefused
from runtime.models import AuditEvent, Decision, Task
from tests.runtime.authz.common import ADMIN, AGENT, OWNER, give, give_both, running_task

pytestmark = pytest.mark.usefixtures("transactional_db")

ROUTE = "gateway:model"


def claims_of(task_id, **changes) -> dict:
    claims = token_verify(token_mint(task=task_id, audience=ROUTE), audience=ROUTE)
    return {**claims, **changes}


def signed(claims: dict, key=None) -> str:
    """A token over `claims`, signed with the deployment's key or another."""
    from django.conf import settings

    pem = settings.STEWARD["CAPABILITY_KEY"]
    key = key or serialization.load_pem_private_key(pem, password=None)
    return jwt.encode(claims, key, algorithm="EdDSA")


def tampered(token: str, **changes) -> str:
    header, payload, signature = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    body.update(changes)
    forged = base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")
    return f"{header}.{forged}.{signature}"


def test_a_minted_token_carries_every_claim_and_verifies_for_its_audience():
    t = running_task()
    give_both()
    claims = token_verify(token_mint(task=t, audience=ROUTE), audience=ROUTE)
    assert set(CLAIMS) <= set(claims)
    row = Task.objects.get(id=t)
    assert (claims["tenant"], claims["agent"], claims["owner"], claims["task"], claims["epoch"]) == (
        "acme",
        AGENT,
        OWNER,
        str(t),
        row.epoch,
    )
    assert claims["authz_revision"] == authz_revision(tenant="acme") == 2
    assert claims["scope"] == [{"action": "tool.search", "resource": "repo:acme/*"}]
    assert claims["nbf"] <= time.time() < claims["exp"] <= claims["iat"] + 300


NOW = int(time.time())
MISUSE = [
    ("wrong_audience", lambda t: token_mint(task=t, audience="gateway:tools")),
    ("expired", lambda t: signed(claims_of(t, exp=NOW - 10))),
    ("not_yet_valid", lambda t: signed(claims_of(t, nbf=int(time.time()) + 600))),
    ("not_yet_valid", lambda t: signed(claims_of(t, iat=int(time.time()) + 600))),
    ("bad_signature", lambda t: signed(claims_of(t), key=Ed25519PrivateKey.generate())),
    ("bad_signature", lambda t: tampered(token_mint(task=t, audience=ROUTE), tenant="globex")),
    ("bad_signature", lambda t: tampered(token_mint(task=t, audience=ROUTE), epoch=99)),
    # Another algorithm (a shared secret, or none at all) is no signature of ours.
    (
        "bad_signature",
        lambda t: jwt.encode(claims_of(t), "a shared secret long enough for HS256 not to warn", algorithm="HS256"),
    ),
    ("bad_signature", lambda t: jwt.encode(claims_of(t), None, algorithm="none")),
    ("malformed", lambda t: signed({k: v for k, v in claims_of(t).items() if k != "epoch"})),
    ("malformed", lambda t: signed(claims_of(t, epoch="3"))),
    ("malformed", lambda t: signed(claims_of(t, task="not-a-uuid"))),
    ("wrong_audience", lambda t: signed(claims_of(t, aud=[ROUTE, "gateway:tools"]))),  # strict: one audience
    ("malformed", lambda t: "not.a.token"),
    ("malformed", lambda t: "x" * 100_000),
    ("malformed", lambda t: "é.\x00.x"),
    ("malformed", lambda t: None),
]


@pytest.mark.parametrize("reason, make", MISUSE)
def test_a_misused_token_is_refused_naming_why(reason, make):
    t = running_task()
    token = make(t)
    with pytest.raises(CapabilityRefused) as error:
        token_verify(token, audience=ROUTE)
    assert (error.value.code, error.value.status, error.value.reason) == ("CAPABILITY_REFUSED", 401, reason)
    assert error.value.details["boundary"] == "credential_gateway"
    with pytest.raises(CapabilityRefused):
        token_authorize(token=token, audience=ROUTE, task=t, action="tool.search", resource="repo:acme/x")
    assert Decision.objects.count() == 0  # a token that proves nothing decides nothing


def test_a_tenant_a_token_reaching_for_a_tenant_b_task_is_denied_at_tenant_isolation():
    mine = running_task()
    theirs = running_task(tenant="globex", owner="user:carol")
    give_both(tenant="globex", owner="user:carol")
    token = token_mint(task=mine, audience=ROUTE)
    decision = token_authorize(token=token, audience=ROUTE, task=theirs, action="tool.search", resource="repo:acme/x")
    assert (decision.allowed, decision.boundary, decision.reason_code) == (False, "tenant_isolation", "tenant_mismatch")
    [event] = AuditEvent.objects.filter(kind="authz.denied", task_id=theirs)
    assert event.data["token"]["tenant"] == "acme" and event.data["token"]["task"] == str(mine)


def test_a_token_for_another_task_or_a_superseded_attempt_is_denied():
    t, other = running_task(), running_task()
    give_both()
    old = token_mint(task=t, audience=ROUTE)
    assert (
        token_authorize(token=old, audience=ROUTE, task=other, action="tool.search", resource="repo:acme/x").reason_code
        == "token_task_mismatch"
    )
    Task.objects.filter(id=t).update(epoch=1)  # a new attempt began
    decision = token_authorize(token=old, audience=ROUTE, task=t, action="tool.search", resource="repo:acme/x")
    assert (decision.allowed, decision.reason_code, decision.epoch) == (False, "superseded_attempt", 0)
    fresh = token_mint(task=t, audience=ROUTE)
    assert token_authorize(token=fresh, audience=ROUTE, task=t, action="tool.search", resource="repo:acme/x").allowed


def test_an_old_token_replayed_after_a_revocation_is_denied_by_current_rows():
    t = running_task()
    _, owner_grant = give_both()
    token = token_mint(task=t, audience=ROUTE)
    assert token_authorize(token=token, audience=ROUTE, task=t, action="tool.search", resource="repo:acme/x").allowed
    grant_revoke(grant_id=owner_grant.id, tenant="acme", actor=ADMIN, reason="revoked mid-task")
    decision = token_authorize(token=token, audience=ROUTE, task=t, action="tool.search", resource="repo:acme/x")
    assert (decision.allowed, decision.boundary, decision.reason_code) == (
        False,
        "credential_gateway",
        "no_grant_owner",
    )
    assert decision.authz_revision > token_verify(token, audience=ROUTE)["authz_revision"]


def test_a_token_scope_is_evidence_and_never_widens_current_authority():
    t = running_task()
    give(f"agent:{AGENT}", "tool.search", "repo:acme/*")
    give(OWNER, "tool.search", "repo:acme/*")
    token = token_mint(task=t, audience=ROUTE)
    # A scope the token does not list is still decided by current rows, and one it does
    # list is no permission by itself: rows decide both ways.
    give(OWNER, "http.post", "https://x")
    give(f"agent:{AGENT}", "http.post", "https://x")
    assert token_authorize(token=token, audience=ROUTE, task=t, action="http.post", resource="https://x").allowed


def test_the_capability_key_setting_fails_loudly_on_anything_but_an_ed25519_private_key(monkeypatch, settings):
    from cryptography.hazmat.primitives.asymmetric import ec

    other = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )
    for bad in ("not a key", other):
        monkeypatch.setenv("STEWARD_CAPABILITY_KEY", bad)
        with pytest.raises(ImproperlyConfigured):
            env.capability_key(False)
    good = (
        Ed25519PrivateKey.generate()
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )
    monkeypatch.setenv("STEWARD_CAPABILITY_KEY", good.replace("\n", "\\n"))  # one line, as in a .env file
    assert env.capability_key(False) == good.encode()
    monkeypatch.delenv("STEWARD_CAPABILITY_KEY")
    assert env.capability_key(False) is None  # no key outside debug: nothing can be minted
    # In debug, this install's own (tests/console/test_dev_secrets.py), as the settings have it.
    assert env.capability_key(True) == settings.STEWARD["CAPABILITY_KEY"]
