"""Token budgets over real HTTP (uvicorn, the fake model on loopback): per task, per
tree (a child's usage counts against its root's) and per tenant, each call's tokens
counted at its finish, and a call once a budget is reached denied budget_exhausted at
credential_gateway, recorded as a decision and an audit event, never forwarded."""

from __future__ import annotations

import uuid

import pytest

from runtime.limits.services import budget_set
from runtime.models import AuditEvent, Decision, GatewayCall, Task, TokenUsage
from tests.console.gateway.conftest import completion_body, ended, model_token, model_url, post
from tests.harness import wait_until
from tests.runtime.authz.common import OWNER, child, give_both, running_task

pytestmark = [pytest.mark.integration]

MODEL = "model:fake-1"
REPLY = "one two three"  # the fake model's usage: 1 prompt token + 3 completion tokens
PER_CALL = 4
ADMIN = "user:dave"


def tenant_with_model(tenant: str) -> None:
    give_both("model.call", MODEL, tenant=tenant, owner=OWNER)


def call(web, task_id, key: str):
    status, answer, headers = post(model_url(web), token=model_token(task_id), body=completion_body(), key=key)
    if status == 200:
        ended(id=headers["Steward-Call"])  # its tokens are counted once it has ended
    return status, answer


def running_child(parent_id, seq: int):
    made = child(parent_id, spawn_seq=seq)
    Task.objects.filter(id=made).update(status="running")
    return made


# scope: (the budget set, the tasks that call in turn (the last one is refused), and a
# task of the same tenant whose calls the budget does not reach). Two calls of 4 tokens
# reach a budget of 8; the third call is refused.
def _task_case(tenant):
    t = running_task(tenant=tenant, owner=OWNER)
    return {"task_tokens": 8}, [t, t, t], running_task(tenant=tenant, owner=OWNER)


def _tree_case(tenant):
    root = running_task(tenant=tenant, owner=OWNER)
    kid, grandkid = running_child(root, 1), None
    grandkid = running_child(kid, 1)
    # the root and a child spend it; the grandchild is refused: it is all one tree
    return {"tree_tokens": 8}, [root, kid, grandkid], running_task(tenant=tenant, owner=OWNER)


def _tenant_case(tenant):
    a, b, c = (running_task(tenant=tenant, owner=OWNER) for _ in range(3))
    other = f"{tenant}-other"
    tenant_with_model(other)
    return {"tenant_tokens": 8}, [a, b, c], running_task(tenant=other, owner=OWNER)


CASES = {"task": _task_case, "tree": _tree_case, "tenant": _tenant_case}


@pytest.mark.parametrize("scope", list(CASES))
def test_a_budget_once_reached_denies_budget_exhausted_at_the_gateway_and_records_it(live, gateway_web, model, scope):
    model.set(reply=REPLY)
    tenant = f"bu-{uuid.uuid4().hex[:8]}"
    tenant_with_model(tenant)
    limits, callers, unreached = CASES[scope](tenant)
    budget_set(tenant=tenant, actor=ADMIN, reason="test", **limits)

    first, second, third = (call(gateway_web, t, key=f"k-{i}") for i, t in enumerate(callers))
    assert (first[0], second[0]) == (200, 200)
    status, answer = third
    assert (status, answer["code"]) == (403, "BUDGET_EXHAUSTED"), answer
    details = answer["details"]
    assert (details["boundary"], details["reason_code"]) == ("credential_gateway", "budget_exhausted")
    assert details["budget"] == {"scope": scope, "limit": 8, "used": 2 * PER_CALL}
    assert len(model.recorded()) == 2  # the refused call never reached the model

    decision = Decision.objects.get(id=details["decision_id"])
    assert (decision.allowed, decision.boundary, decision.reason_code, decision.task_id) == (
        False,
        "credential_gateway",
        "budget_exhausted",
        callers[2],
    )
    event = AuditEvent.objects.get(kind="authz.denied", data__decision_id=str(decision.id))
    assert event.data["budget"] == {"scope": scope, "limit": 8, "used": 8}
    assert GatewayCall.objects.get(decision_id=decision.id).outcome == "denied"

    # Not every budget is spent: a task the exhausted one does not cover still calls.
    assert call(gateway_web, unreached, key="k-free")[0] == 200


def test_each_call_s_tokens_are_kept_on_its_row_and_in_its_task_tree_and_tenant_totals(live, gateway_web, model):
    model.set(reply=REPLY)
    tenant = f"bu-{uuid.uuid4().hex[:8]}"
    tenant_with_model(tenant)
    root = running_task(tenant=tenant, owner=OWNER)
    kid = running_child(root, 1)
    for i, t in enumerate([root, kid, kid]):
        assert call(gateway_web, t, key=f"k-{i}")[0] == 200
    assert sorted(GatewayCall.objects.filter(tenant=tenant).values_list("tokens", flat=True)) == [PER_CALL] * 3

    def used(scope, subject):
        rows = TokenUsage.objects.filter(scope=scope, subject=str(subject))
        return sum(r.tokens for r in rows), sum(r.calls for r in rows)

    assert used("task", root) == (PER_CALL, 1)
    assert used("task", kid) == (2 * PER_CALL, 2)
    assert used("tree", root) == (3 * PER_CALL, 3)
    assert used("tenant", tenant) == (3 * PER_CALL, 3)


def test_a_stream_without_usage_counts_its_chunks_and_its_prompt(live, gateway_web, model):
    from tests.console.gateway.conftest import events, open_stream

    model.set(reply="abcdefgh", chunks=4)
    tenant = f"bu-{uuid.uuid4().hex[:8]}"
    tenant_with_model(tenant)
    t = running_task(tenant=tenant, owner=OWNER)
    with open_stream(model_url(gateway_web), token=model_token(t), body=completion_body(stream=True)) as stream:
        seen = list(events(stream))
    assert seen[-1] == ("message", "[DONE]")
    row = ended(task_id=t)
    prompt = -(-len('[{"role": "user", "content": "hi"}]') // 4)
    assert row.tokens == prompt + 4


def test_raising_a_budget_lets_calls_through_again(live, gateway_web, model):
    model.set(reply=REPLY)
    tenant = f"bu-{uuid.uuid4().hex[:8]}"
    tenant_with_model(tenant)
    t = running_task(tenant=tenant, owner=OWNER)
    budget = budget_set(tenant=tenant, actor=ADMIN, task_tokens=PER_CALL)
    assert call(gateway_web, t, key="a")[0] == 200
    assert call(gateway_web, t, key="b")[0] == 403
    budget_set(tenant=tenant, actor=ADMIN, task_tokens=3 * PER_CALL, version=budget.version, reason="more")
    assert call(gateway_web, t, key="c")[0] == 200


def test_finishes_racing_through_the_gateway_lose_no_tokens_and_never_deadlock(live, gateway_web, model):
    """Eight callers end calls of one tree and tenant at once (a barrier per round,
    the gateway's database threads on their own connections): every call's tokens arrive in the
    task, tree and tenant totals, exactly."""
    import threading

    model.set(reply=REPLY)
    tenant = f"bu-{uuid.uuid4().hex[:8]}"
    tenant_with_model(tenant)
    root = running_task(tenant=tenant, owner=OWNER)
    kids = [running_child(root, i + 1) for i in range(8)]
    rounds, statuses = 10, []
    barrier = threading.Barrier(len(kids))

    tokens = {k: model_token(k) for k in kids}  # here: the callers' threads make no database connection

    def caller(kid):
        token = tokens[kid]
        for r in range(rounds):
            barrier.wait(60)
            statuses.append(post(model_url(gateway_web), token=token, body=completion_body(), key=f"k-{r}")[0])

    threads = [threading.Thread(target=caller, args=(k,)) for k in kids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert statuses == [200] * rounds * len(kids)
    calls = rounds * len(kids)
    wait_until(
        lambda: not GatewayCall.objects.filter(tenant=tenant, outcome="admitted").exists(),
        timeout=30,
        message="every call to end",
    )

    def used(scope, subject):
        return sum(TokenUsage.objects.filter(scope=scope, subject=str(subject)).values_list("tokens", flat=True))

    assert used("tree", root) == used("tenant", tenant) == PER_CALL * calls
    assert [used("task", k) for k in kids] == [PER_CALL * rounds] * len(kids)
