"""Journey: the demo research batch asks a person to approve submitting its results.
alice approves it in the inbox and watches the task resume and complete, without a
reload; bob sees the request but is offered no decision, and one he crafts is refused;
a request that went stale while alice had it open is refused at her approve, with what
changed shown inline, before and after."""

from __future__ import annotations

from playwright.sync_api import expect

from runtime import states
from runtime.authz.services import grant_create
from runtime.models import Approval, AuditEvent, Task
from runtime.tasks.services import task_submit
from tests.e2e.stack import EVENT_MS, EVENT_S, csrf_token, mark_page, screenshot, still_same_page
from tests.harness import wait_until

# dave starts it (the starter may not approve his own task's requests; alice may).
INPUT = {"experiments": 1, "overnight_seconds": 0, "approve_results": True}
DAVE = {"tenant": "acme", "owner": "user:dave", "actor": "user:dave"}


def batch_waiting_for_approval(question: str, results_url: str) -> tuple[Task, Approval]:
    task_id = task_submit(
        agent="research.batch", input={"question": question, "results_url": results_url, **INPUT}, **DAVE
    ).task_id
    approval = wait_until(
        lambda: Approval.objects.filter(task_id=task_id, state=states.PENDING).first(),
        timeout=EVENT_S,
        message="the batch to ask for approval",
    )
    wait_until(
        lambda: Task.objects.filter(id=task_id, status=states.BLOCKED).exists(),
        timeout=EVENT_S,
        message="the batch to wait, blocked, for the decision",
    )
    return Task.objects.get(id=task_id), approval


def test_alice_approves_the_batchs_results_and_watches_it_complete_and_bob_cannot_decide(
    person, fleet, results_service
):
    fleet.workers(2)
    fleet.supervisors(1)
    task, approval = batch_waiting_for_approval("Is the approval journey green?", results_service.url)
    assert not [c for c in results_service.calls() if c["key"].startswith(str(task.id))], (
        "nothing is submitted before a person approves"
    )

    # bob (a viewer) sees the request, laid out, and is offered no decision.
    bob = person("bob")
    bob.goto("/approvals/")
    expect(bob.locator(f"#approval-{approval.id}")).to_have_attribute("data-state", states.PENDING)
    bob.goto(f"/approvals/{approval.id}/")
    expect(bob.locator("#action")).to_contain_text("submit results")
    expect(bob.locator("#decide")).to_contain_text("An operator of this tenant decides it.")
    assert bob.get_by_role("button", name="Approve").count() == 0
    # An approval he crafts himself, with a valid CSRF token, is refused and changes nothing.
    answer = bob.request.post(
        f"/approvals/{approval.id}/approve/",
        form={"comment": "bob"},
        headers={"X-CSRFToken": csrf_token(bob)},
        max_redirects=0,
    )
    assert answer.status == 403, answer.status
    assert Approval.objects.get(id=approval.id).state == states.PENDING

    # She watches the task resume and complete on its page, open in a second window
    # before she decides, and never reloaded.
    watching = person("alice")
    watching.goto(f"/tasks/{task.id}/")
    header = watching.locator("#task-status")
    expect(header).to_have_attribute("data-status", states.BLOCKED)
    expect(watching.locator("body")).to_contain_text("approve-results")
    mark_page(watching)

    # alice finds it in her inbox, opens it and approves it: two clicks.
    alice = person("alice")
    alice.goto("/approvals/")
    row = alice.locator(f"#approval-{approval.id}")
    expect(row).to_contain_text("waiting for approval")
    expect(row).to_contain_text("user:dave")
    screenshot(alice, "approvals")
    row.get_by_role("link").first.click()
    expect(alice.locator("#approval-state")).to_have_attribute("data-state", states.PENDING)
    screenshot(alice, "approval")
    alice.fill("input[name=comment]", "results look right")
    with alice.expect_navigation(timeout=EVENT_MS):
        alice.get_by_role("button", name="Approve").click()
    expect(alice.locator("body")).to_contain_text("Approved")
    expect(header).to_have_attribute("data-status", states.COMPLETED, timeout=EVENT_MS)
    assert still_same_page(watching), "the task page was reloaded"

    task.refresh_from_db()
    assert task.output["receipt"]["key"] and task.output["summary"]["completed"] == 1
    assert results_service.performed_by_key().get(task.output["receipt"]["key"]) == 1
    approval.refresh_from_db()
    assert (approval.state, approval.decided_by, approval.comment) == (
        states.CONSUMED,
        "user:alice",
        "results look right",
    )
    assert AuditEvent.objects.filter(task_id=task.id, kind="approval.approved", actor="user:alice").count() == 1
    assert not AuditEvent.objects.filter(task_id=task.id, actor="user:bob").exists()
    screenshot(watching, "task-approved")


def test_a_request_that_went_stale_while_open_is_refused_with_the_reason(person, fleet, results_service):
    fleet.workers(1)
    fleet.supervisors(1)
    task, approval = batch_waiting_for_approval("Does a stale approval stay refused?", results_service.url)
    alice = person("alice")
    alice.goto(f"/approvals/{approval.id}/")
    expect(alice.get_by_role("button", name="Approve")).to_be_visible()
    before = approval.context["authz_revision"]

    # While her page is open, a grant of acme changes: the package is bound to the
    # tenant's authz_revision. Her approve is refused at the decision, the change shown
    # inline, before and after, and the request reads stale, as the executor would have
    # found it; the agent asks anew.
    grant_create(
        tenant="acme",
        principal="agent:research.batch",
        action="tool.search",
        resource="repo:acme/stale",
        actor="user:dave",
    )
    alice.fill("input[name=comment]", "results look right")
    alice.get_by_role("button", name="Approve").click()
    error = alice.locator("#form-error")
    expect(error).to_contain_text("APPROVAL_STALE", timeout=EVENT_MS)
    expect(error).to_contain_text(f"authz_revision {before} → {before + 1}")
    # In her words, the key beside it, and both values.
    changed = alice.locator("#changed-authz_revision")
    expect(changed).to_contain_text("The agent's grants")
    expect(changed.locator("code.key")).to_have_text("authz_revision")
    expect(changed.locator("dd")).to_have_text(f"{before} → {before + 1}")
    expect(alice.locator("#approval-state")).to_have_attribute("data-state", states.STALE)
    expect(alice.locator("#stale-reason")).to_contain_text(f"authz_revision {before} → {before + 1}")
    assert alice.get_by_role("button", name="Approve").count() == 0
    screenshot(alice, "approval-stale")
    assert not AuditEvent.objects.filter(task_id=task.id, kind="approval.approved").exists()

    again = wait_until(
        lambda: Approval.objects.filter(task_id=task.id, state=states.PENDING).first(),
        timeout=EVENT_S,
        message="the batch to ask anew",
    )
    assert again.name == "approve-results-2"
    # Pressed again from another tab, it is refused as decided, naming who found it stale.
    answer = alice.request.post(
        f"/approvals/{approval.id}/approve/",
        form={"comment": "again"},
        headers={"X-CSRFToken": csrf_token(alice)},
        max_redirects=0,
    )
    assert answer.status == 409 and "APPROVAL_ALREADY_DECIDED" in answer.text()
    assert "found when user:alice approved it" in answer.text()
    # The page leads to the request the agent asked anew.
    alice.reload()
    expect(alice.locator("#asked-again a")).to_have_attribute("href", f"/approvals/{again.id}/")
    assert not [c for c in results_service.calls() if c["key"].startswith(str(task.id))], (
        "nothing was submitted on a stale approval"
    )
    wait_until(
        lambda: Task.objects.filter(id=task.id, status=states.BLOCKED).exists(),
        timeout=EVENT_S,
        message="the batch to wait for its new request",
    )
