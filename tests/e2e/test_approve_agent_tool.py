"""Journey: a plain Pydantic AI agent run by StewardAgent (the demo's research.reporter)
asks, through its `send_report` tool that requires approval, for a person's approval.
dave started it; alice finds the call in her inbox, laid out as the tool's name and
arguments, approves it, and watches the task resume and complete without a reload; the
report reaches the keyed results service once. Denial, expiry and a stale package are
tests/console/gateway/test_gateway_agent_approvals.py (real workers, no browser)."""

from __future__ import annotations

from playwright.sync_api import expect

from runtime import states
from runtime.authz.services import grant_create
from runtime.models import Approval, AuditEvent, Effect, Step, Task
from runtime.tasks.services import task_submit
from tests.e2e.stack import EVENT_MS, EVENT_S, mark_page, still_same_page
from tests.harness import wait_until


def test_alice_approves_a_pydantic_ai_tool_call_in_the_inbox_and_the_run_completes(person, fleet, web, results_service):
    for principal in ("agent:research.reporter", "user:dave"):
        grant_create(tenant="acme", principal=principal, action="model.call", resource="model:*", actor="user:dave")
    fleet.workers(1, env={"STEWARD_GATEWAY_URL": web.url})
    fleet.supervisors(1)
    task_id = task_submit(
        agent="research.reporter",
        input={"prompt": "Warmup removed the early loss spikes."},
        tenant="acme",
        owner="user:dave",
        actor="user:dave",
    ).task_id
    approval = wait_until(
        lambda: Approval.objects.filter(task_id=task_id, state=states.PENDING).first(),
        timeout=EVENT_S,
        message="the reporter to ask for approval",
    )
    wait_until(
        lambda: Task.objects.filter(id=task_id, status=states.BLOCKED).exists(),
        timeout=EVENT_S,
        message="the reporter to wait, blocked, holding no worker",
    )
    assert approval.action == {"tool": "send_report", "arguments": {"report": "Warmup removed the early loss spikes."}}
    assert not [c for c in results_service.calls() if c["key"].startswith(str(task_id))]

    watching = person("alice")
    watching.goto(f"/tasks/{task_id}/")
    header = watching.locator("#task-status")
    expect(header).to_have_attribute("data-status", states.BLOCKED)
    mark_page(watching)

    alice = person("alice")
    alice.goto("/approvals/")
    row = alice.locator(f"#approval-{approval.id}")
    expect(row).to_contain_text("user:dave")
    row.get_by_role("link").first.click()
    expect(alice.locator("#approval-state")).to_have_attribute("data-state", states.PENDING)
    expect(alice.locator("body")).to_contain_text("send_report")
    expect(alice.locator("body")).to_contain_text("Warmup removed the early loss spikes.")
    alice.fill("input[name=comment]", "send it")
    with alice.expect_navigation(timeout=EVENT_MS):
        alice.get_by_role("button", name="Approve").click()
    expect(alice.locator("body")).to_contain_text("Approved")
    expect(header).to_have_attribute("data-status", states.COMPLETED, timeout=EVENT_MS)
    assert still_same_page(watching), "the task page was reloaded"

    task = Task.objects.get(id=task_id)
    assert task.output.startswith("tool said: ")
    sent = Effect.objects.get(task_id=task_id, name="tool:send_report")
    assert results_service.performed_by_key().get(sent.key) == 1
    approval.refresh_from_db()
    assert (approval.state, approval.decided_by, approval.comment) == (states.CONSUMED, "user:alice", "send it")
    assert AuditEvent.objects.filter(task_id=task_id, kind="approval.approved", actor="user:alice").count() == 1
    assert list(Step.objects.filter(task_id=task_id).order_by("seq").values_list("kind", "name")) == [
        ("effect", "model:fake-1"),
        ("approval", "approve:send_report"),
        ("approval_check", "approve:send_report"),
        ("effect", "tool:send_report"),
        ("effect", "model:fake-1"),
    ]
