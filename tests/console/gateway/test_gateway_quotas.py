"""Service quotas: counted fleet-wide in Redis, configured in PostgreSQL. Calls raced
through two web processes at once admit exactly the quota per window, the rest are
refused quota_exceeded at credential_gateway with a Retry-After, and a Redis that does
not answer closes the quota (quota_unavailable) instead of opening it."""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter

import pytest

from runtime.gateway import TOOL_ACTION, tool_resource, tool_route
from runtime.gateway.services import gateway_admit
from runtime.limits import quotas
from runtime.limits.services import quota_set
from runtime.models import AuditEvent, Decision, GatewayCall
from tests.console.gateway.conftest import MODEL_KEY, TOOL_KEY, _until_its_sessions_are_gone, model_token, post
from tests.e2e.stack import WebServer
from tests.runtime.authz.common import OWNER, give_both, running_task
from tests.runtime.authz.test_tokens import claims_of

pytestmark = [pytest.mark.integration]

ADMIN = "user:dave"
TRIALS = 6
CALLERS = 10
QUOTA = 4
DAY = 86_400  # a window no trial straddles, but at midnight UTC


@pytest.fixture(scope="module")
def second_web(child_env, fake_model, gateway_web, django_db_blocker):
    env = {
        **child_env,
        "STEWARD_MODEL_URL": fake_model.url,
        "STEWARD_MODEL_KEY": MODEL_KEY,
        "STEWARD_TOOLS": json.dumps({"echo": {"url": fake_model.tool_url, "key": TOOL_KEY}}),
    }
    web = WebServer(env).start()  # a second web process, on a free port of its own
    try:
        yield web.wait_ready()
    finally:
        web.stop()
        with django_db_blocker.unblock():
            _until_its_sessions_are_gone(web)


def tool_tenant() -> tuple[str, object]:
    tenant = f"qu-{uuid.uuid4().hex[:8]}"
    give_both(TOOL_ACTION, "tool:echo/*", tenant=tenant, owner=OWNER)
    return tenant, running_task(tenant=tenant, owner=OWNER)


def tool_url(web, path: str = "ping") -> str:
    return f"{web.url}/gateway/tools/echo/{path}"


def test_calls_raced_through_two_web_processes_admit_exactly_the_quota(live, gateway_web, second_web, model):
    outcomes = Counter()
    for trial in range(TRIALS):
        tenant, t = tool_tenant()
        quota_set(tenant=tenant, service="echo", calls=QUOTA, window_seconds=DAY, actor=ADMIN)
        token = model_token(t, audience=tool_route("echo"))
        barrier = threading.Barrier(CALLERS)
        answers = [None] * CALLERS

        def send(i):
            web = (gateway_web, second_web)[i % 2]
            barrier.wait()
            answers[i] = post(tool_url(web, f"t{trial}"), token=token, body={"n": i}, key=f"k-{trial}-{i}")

        threads = [threading.Thread(target=send, args=(i,)) for i in range(CALLERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        statuses = Counter(a[0] for a in answers)
        assert statuses == {200: QUOTA, 429: CALLERS - QUOTA}, (trial, statuses)
        for status, answer, headers in answers:
            if status == 429:
                assert answer["code"] == "QUOTA_EXCEEDED"
                assert (answer["details"]["boundary"], answer["details"]["reason_code"]) == (
                    "credential_gateway",
                    "quota_exceeded",
                )
                assert 1 <= int(headers["Retry-After"]) <= DAY
        forwarded = [r for r in model.recorded() if r["path"].startswith(f"/tool/t{trial}")]
        assert len(forwarded) == QUOTA
        denied = Decision.objects.filter(tenant=tenant, reason_code="quota_exceeded", boundary="credential_gateway")
        assert denied.count() == CALLERS - QUOTA
        assert (
            AuditEvent.objects.filter(tenant=tenant, kind="authz.denied", data__reason_code="quota_exceeded").count()
            == CALLERS - QUOTA
        )
        outcomes.update(statuses)
    assert outcomes == {200: QUOTA * TRIALS, 429: (CALLERS - QUOTA) * TRIALS}


def test_a_call_its_authority_denies_does_not_use_the_quota_up(live, gateway_web, model):
    tenant, t = tool_tenant()
    quota_set(tenant=tenant, service="echo", calls=1, window_seconds=DAY, actor=ADMIN)
    token = model_token(t, audience=tool_route("echo"))
    # A task of the tenant whose owner holds no grant: its call is denied for authority,
    # counted in Redis first, and given back; the one call the quota allows remains.
    bare = running_task(tenant=tenant, owner="user:nobody")
    status, answer, _ = post(tool_url(gateway_web), token=model_token(bare, audience=tool_route("echo")), body={})
    assert (status, answer["details"]["reason_code"]) == (403, "no_grant_owner")
    assert post(tool_url(gateway_web), token=token, body={}, key="k-2")[0] == 200
    status, answer, _ = post(tool_url(gateway_web), token=token, body={}, key="k-3")
    assert (status, answer["code"]) == (429, "QUOTA_EXCEEDED")


def test_a_service_without_a_quota_is_not_counted(live, gateway_web, model):
    tenant, t = tool_tenant()
    token = model_token(t, audience=tool_route("echo"))
    assert [post(tool_url(gateway_web), token=token, body={}, key=f"k-{i}")[0] for i in range(5)] == [200] * 5


def test_a_redis_that_does_not_answer_closes_the_quota_and_the_denial_is_recorded(live, settings):
    tenant, t = tool_tenant()
    quota_set(tenant=tenant, service="echo", calls=100, window_seconds=DAY, actor=ADMIN)
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    quotas._client.cache_clear()
    quotas._take.cache_clear()
    try:
        admission = gateway_admit(
            claims=claims_of(t, aud=tool_route("echo")),
            route=tool_route("echo"),
            action=TOOL_ACTION,
            resource=tool_resource("echo", "ping"),
            idempotency_key="k",
            service="echo",
        )
    finally:
        quotas._client.cache_clear()
        quotas._take.cache_clear()
    assert admission.outcome == "denied"
    assert (admission.decision.boundary, admission.decision.reason_code) == ("credential_gateway", "quota_unavailable")
    assert admission.quota.retry_after == quotas.UNAVAILABLE_RETRY_SECONDS
    assert GatewayCall.objects.get(id=admission.call_id).outcome == "denied"
    assert (
        AuditEvent.objects.filter(tenant=tenant, kind="authz.denied", data__reason_code="quota_unavailable").count()
        == 1
    )


# (the gateway's answer, what the worker's client raises): a quota refusal was never
# forwarded, so the effect is not applied (never `unknown`); a budget is a denial.
CLIENT = [
    (429, {"code": "QUOTA_EXCEEDED", "details": {"reason_code": "quota_exceeded"}}, "EffectNotApplied"),
    (503, {"code": "QUOTA_UNAVAILABLE", "details": {"reason_code": "quota_unavailable"}}, "EffectNotApplied"),
    (
        403,
        {"code": "BUDGET_EXHAUSTED", "details": {"reason_code": "budget_exhausted", "boundary": "credential_gateway"}},
        "AuthorityDenied",
    ),
    (503, {"code": "SOMETHING_ELSE"}, "OSError"),  # may have acted: the ledger decides
]


@pytest.mark.parametrize(("status", "refusal", "raised"), CLIENT, ids=[c[1]["code"] for c in CLIENT])
def test_the_worker_s_client_reads_budget_and_quota_refusals_as_not_applied_or_denied(status, refusal, raised):
    from runtime.gateway import client

    with pytest.raises(Exception) as caught:
        client._raise(status, refusal, ctx=None)
    assert type(caught.value).__name__ == raised
