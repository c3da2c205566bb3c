"""alice, an operator of acme given the right over t.steps's grants, opens the agent's
page, reads what revoking one of its grants will reach, and revokes it with a reason; the
grant shows revoked, and its history and the audit trail say who, when and why. bob, a
viewer, is offered no revoke and his crafted POST is refused.

The gateway's half: a t.model task's model reply is streaming through the credential
gateway; the preview names that call; alice revokes its agent's grant; the stream is cut
at its next chunk, the task is blocked and its page names the boundary; resumed, its
next gateway call is denied again on current grants."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from console.access import agent_steward_set, person_principal
from runtime import states
from runtime.authz.services import authorize, grant_create
from runtime.models import AuditEvent, Decision, GatewayCall, Grant, Task
from runtime.tasks.services import task_submit
from tests.e2e.stack import EVENT_MS, EVENT_S, csrf_token, screenshot
from tests.faults.support import submit
from tests.harness import wait_until

REASON = "t.steps no longer needs the docs repository"


def acme_authority(people):
    """Grants given by dave (admin): t.steps may search acme's repositories, and so may
    alice; alice holds the right over t.steps's grants; a live t.steps task of alice's
    (queued: no worker runs here) with one allow and one denial recorded."""
    search = grant_create(
        tenant="acme", principal="agent:t.steps", action="tool.search", resource="repo:acme/*", actor="user:dave"
    )
    chat = grant_create(
        tenant="acme", principal="agent:t.steps", action="model.chat", resource="model:*", actor="user:dave"
    )
    grant_create(tenant="acme", principal="user:alice", action="tool.search", resource="repo:*", actor="user:dave")
    agent_steward_set(
        principal=person_principal(people.dave, "acme", channel="console", credential="e2e-setup"),
        name="t.steps",
        username="alice",
        allowed=True,
        reason="on call",
    )
    task = submit("t.steps", {"n": 1})
    authorize(task=task.task_id, action="tool.search", resource="repo:acme/docs", boundary="credential_gateway")
    authorize(task=task.task_id, action="http.post", resource="https://example.com", boundary="credential_gateway")
    return search, chat, task.task_id


def revoke_from_agent_page(page, agent: str, grant, reason: str) -> int:
    """From the agent's page, revoke `grant` after reading its preview; the count the
    preview showed."""
    page.goto(f"/agents/{agent}/")
    page.locator(f"#grant-{grant.id}").get_by_role("link", name="Revoke…").click()
    count = page.locator("#affected-count")
    expect(count).to_be_visible(timeout=EVENT_MS)
    shown = int(count.get_attribute("data-count"))
    expect(page.locator("#limits")).to_contain_text("Effects already committed are not undone")
    assert Grant.objects.get(id=grant.id).revoked_at is None  # reading the preview changed nothing
    screenshot(page, "grant-revoke")
    page.locator("textarea[name=reason]").fill(reason)
    page.get_by_role("button", name=f"Revoke grant #{grant.id}").click()
    expect(page.locator("#grant-state")).to_have_attribute("data-state", "revoked", timeout=EVENT_MS)
    return shown


def test_alice_reads_the_preview_then_revokes_an_agents_grant_and_bob_cannot(person, people):
    search, chat, task_id = acme_authority(people)
    page = person("alice")

    page.goto("/agents/t.steps/")
    expect(page.locator(f"#grant-{search.id}")).to_have_attribute("data-state", "live")
    expect(page.locator("#agent-tasks")).to_contain_text(str(task_id)[:13])
    expect(page.locator("#agent-decisions tr[data-allowed=false]")).to_contain_text("credential_gateway")
    screenshot(page, "agent")

    shown = revoke_from_agent_page(page, "t.steps", search, REASON)
    assert shown == 1  # the queued task
    expect(page.locator("#revoked-by")).to_contain_text("user:alice")
    expect(page.locator("#revoked-by")).to_contain_text(REASON)
    expect(page.locator("#grant-history tr[data-kind='grant.revoked']")).to_contain_text(REASON)
    screenshot(page, "grant")

    event = AuditEvent.objects.get(kind="grant.revoked", data__grant=search.id)
    assert (event.actor, event.data["reason"], event.data["affected_tasks"]) == ("user:alice", REASON, shown)
    assert event.data["via"]["channel"] == "console" and event.at is not None
    page.goto(f"/audit/{event.id}/")
    expect(page.locator("body")).to_contain_text("grant.revoked")
    expect(page.locator("body")).to_contain_text("user:alice")

    page.goto(f"/tasks/{task_id}/")
    expect(page.locator("#task-decisions tr[data-allowed=false]")).to_contain_text("no_grant")
    screenshot(page, "task-decisions")
    page.goto("/grants/?principal=agent:t.steps&state=any")
    expect(page.locator(f"#grant-{search.id}")).to_have_attribute("data-state", "revoked")
    screenshot(page, "grants")
    page.goto("/decisions/?outcome=denied")
    expect(page.locator("tr[data-allowed=false]").first).to_be_visible()
    screenshot(page, "decisions")

    bob = person("bob")
    bob.goto("/agents/t.steps/")
    expect(bob.locator(f"#grant-{chat.id}")).to_have_attribute("data-state", "live")
    assert bob.locator("a[href*='/revoke/'], a[href*='/narrow/'], form[action*='/revoke/']").count() == 0
    bob.goto(f"/grants/{chat.id}/")
    assert bob.get_by_role("link", name=re.compile("Revoke|Narrow")).count() == 0
    token = csrf_token(bob)
    response = bob.request.post(
        f"/grants/{chat.id}/revoke/", form={"reason": "crafted"}, headers={"X-CSRFToken": token, "Referer": bob.url}
    )
    assert response.status == 403
    assert Grant.objects.get(id=chat.id).revoked_at is None


def test_after_alice_revokes_an_agents_grant_its_stream_is_cut_its_next_gateway_call_denied_and_shown(
    person, people, fleet, web, fake_model
):
    agent_grant = grant_create(
        tenant="acme", principal="agent:t.model", action="model.call", resource="model:*", actor="user:dave"
    )
    grant_create(tenant="acme", principal="user:alice", action="model.call", resource="model:*", actor="user:dave")
    agent_steward_set(
        principal=person_principal(people.dave, "acme", channel="console", credential="e2e-setup"),
        name="t.model",
        username="alice",
        allowed=True,
        reason="on call",
    )
    fleet.workers(1, env={"STEWARD_GATEWAY_URL": web.url})
    fleet.supervisors(1)
    with fake_model.lock:
        fake_model.requests.clear()
    # A reply streamed over a minute: it is still in flight while alice reads and confirms.
    fake_model.set(reply=" ".join(f"w{i}" for i in range(600)), chunks=600, chunk_delay=0.1)
    try:
        task_id = task_submit(
            agent="t.model",
            input={"prompt": "summarise the week", "stream": True},
            tenant="acme",
            owner="user:alice",
            actor="user:alice",
        ).task_id
        wait_until(
            lambda: GatewayCall.objects.filter(task_id=task_id, outcome="admitted").exists(),
            timeout=EVENT_S,
            message="the task's model stream to be under way in the gateway",
        )

        page = person("alice")
        page.goto("/agents/t.model/")
        page.locator(f"#grant-{agent_grant.id}").get_by_role("link", name="Revoke…").click()
        expect(page.locator("#in-flight")).to_contain_text("1 call in flight")
        expect(page.locator("#preview")).to_contain_text("in the credential gateway at")
        page.goto("/agents/t.model/")
        shown = revoke_from_agent_page(page, "t.model", agent_grant, "the model budget moved to another agent")
        assert shown == 1
        event = AuditEvent.objects.get(kind="grant.revoked", data__grant=agent_grant.id)
        assert event.data["affected_tasks"] == shown

        task = wait_until(
            lambda: Task.objects.filter(id=task_id, status=states.BLOCKED).first(),
            timeout=EVENT_S,
            message="the cut stream's denial to block the task",
        )
    finally:
        fake_model.set(reply=None, chunks=4, chunk_delay=0.0)
    assert GatewayCall.objects.get(task_id=task_id, outcome="partial")  # cut at its next chunk
    first = Decision.objects.get(task_id=task_id, allowed=False)
    assert (first.boundary, first.reason_code, task.blocked_decision_id) == (
        "credential_gateway",
        "no_grant_agent",
        first.id,
    )

    page.goto(f"/tasks/{task_id}/")
    expect(page.locator("#task-status")).to_have_text("blocked")
    expect(page.locator("#blocked-denied")).to_contain_text("authority denied at credential_gateway")
    expect(page.locator("#blocked-denied")).to_contain_text("no_grant_agent")
    expect(page.locator("#task-decisions tr[data-allowed=false]")).to_contain_text("credential_gateway")
    screenshot(page, "task-denied")

    # Resumed without a new grant, the agent's next gateway call is decided on current
    # rows again, and denied again: a resume never brings the authority back.
    page.get_by_role("link", name="Resume…").click()
    page.locator("textarea[name=reason]").fill("try again")
    page.get_by_role("button", name="Resume task").click()
    wait_until(
        lambda: Decision.objects.filter(task_id=task_id, allowed=False).count() == 2,
        timeout=EVENT_S,
        message="the resumed attempt's gateway call to be denied",
    )
    again = Decision.objects.filter(task_id=task_id, allowed=False).latest("at")
    task = wait_until(
        lambda: Task.objects.filter(id=task_id, status=states.BLOCKED, blocked_decision=again.id).first(),
        timeout=EVENT_S,
        message="the task to be blocked again by the new denial",
    )
    assert (again.boundary, again.epoch) == ("credential_gateway", task.epoch) and task.epoch > first.epoch
    page.goto(f"/tasks/{task_id}/")
    expect(page.locator("#blocked-denied")).to_contain_text(str(again.id))
