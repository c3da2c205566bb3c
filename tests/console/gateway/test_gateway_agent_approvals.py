"""End to end, on real workers through the real gateway: a tool call that needs approval,
under StewardAgent (Pydantic AI, `requires_approval=True`) and under StewardRunner (the
OpenAI Agents SDK, `needs_approval=True`), ends as the approvals contract says
(expiry means deny; a stale package needs a fresh approval; runtime/integrations/approvals.py):

| the package        | ends                                                                   |
|--------------------|------------------------------------------------------------------------|
| denied             | the tool never runs; the model is told, in the tool's place             |
| expired            | "expiry means deny": the same, told it expired                          |
| stale              | refused at the approve (APPROVAL_STALE); a fresh package is asked for   |
|                    | the same call, under another name; approved, the tool acts once        |

Approval in the browser is tests/e2e/test_approve_agent_tool.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from runtime import states
from runtime.approvals.services import approval_decide
from runtime.authz.services import grant_create
from runtime.errors import ApprovalStale
from runtime.models import Approval, Effect, Task
from tests.console.gateway.test_gateway_pydantic_ai import finished, journal, model_keys
from tests.faults.support import submit
from tests.harness import wait_until
from tests.runtime.authz.common import give_both

pytestmark = [pytest.mark.integration]

# integration: (the agent, its tool, the same agent whose approvals expire in 3 s)
AGENTS = {
    "pydantic_ai": ("t.pa.approve", "send_summary", "t.pa.expire"),
    "openai_agents": ("t.oa.approve", "oa_send_summary", "t.oa.expire"),
}


@pytest.fixture
def env(gateway_web, fake):
    for approve, _, expire in AGENTS.values():
        give_both("model.call", "model:fake-1", agent=approve)
        give_both("model.call", "model:fake-1", agent=expire)
    return {"STEWARD_GATEWAY_URL": gateway_web.url, "T_PA_SERVICE_URL": fake.url}


def pending(task_id, name: str) -> Approval:
    return wait_until(
        lambda: Approval.objects.filter(task_id=task_id, state=states.PENDING, name=name).first(),
        timeout=60,
        message=f"the package {name}",
    )


def no_model_request_repeated(model, task_id, requests: int = 2) -> None:
    models = list(Effect.objects.filter(task_id=task_id, name="model:fake-1"))
    assert len(models) == requests and model_keys(model) == Counter({e.key: 1 for e in models})


@pytest.mark.parametrize("integration", AGENTS)
def test_an_expired_package_means_deny_the_tool_never_runs_and_the_model_is_told(
    live, fleet, env, model, fake, integration
):
    _, tool, agent = AGENTS[integration]
    fleet.supervisors(1)  # its sweep expires the package and wakes the task
    fleet.workers(1, env=env)
    t = submit(agent, {"prompt": "the summary"}).task_id
    approval = pending(t, f"approve:{tool}")
    task = finished(t)
    assert task.status == states.COMPLETED, task.error
    assert Approval.objects.get(id=approval.id).state == states.EXPIRED
    assert task.output == "tool said: A person's approval of this call expired. It was not run."
    assert fake.performed_by_key() == {}
    no_model_request_repeated(model, t)


@pytest.mark.parametrize("integration", AGENTS)
def test_a_package_gone_stale_is_refused_at_the_approve_and_asked_anew_then_the_tool_acts_once(
    live, fleet, env, model, fake, integration
):
    agent, tool, _ = AGENTS[integration]
    fleet.supervisors(1)
    fleet.workers(1, env=env)
    t = submit(agent, {"prompt": "the summary"}).task_id
    first = pending(t, f"approve:{tool}")
    # A grant of the tenant changes while the package waits: it was bound to the old authz_revision.
    grant_create(tenant="acme", principal="agent:other", action="tool.search", resource="repo:x", actor="user:dave")
    with pytest.raises(ApprovalStale):
        approval_decide(approval_id=first.id, tenant="acme", actor="user:dave", decision="approve")
    assert Approval.objects.get(id=first.id).state == states.STALE
    again = pending(t, f"approve:{tool}-2")
    assert again.action == first.action == {"tool": tool, "arguments": {"summary": "the summary"}}
    assert fake.performed_by_key() == {}  # nothing acted on the stale package
    approval_decide(approval_id=again.id, tenant="acme", actor="user:dave", decision="approve")
    task = finished(t)
    assert task.status == states.COMPLETED, task.error
    sent = Effect.objects.get(task_id=t, name=f"tool:{tool}")
    assert fake.performed_by_key() == {sent.key: 1}
    no_model_request_repeated(model, t)
    assert journal(t) == [
        ("effect", "model:fake-1"),
        ("approval", f"approve:{tool}"),
        ("approval_check", f"approve:{tool}"),
        ("approval", f"approve:{tool}-2"),
        ("approval_check", f"approve:{tool}-2"),
        ("effect", f"tool:{tool}"),
        ("effect", "model:fake-1"),
    ]
    assert Task.objects.get(id=t).output.startswith("tool said: ")
