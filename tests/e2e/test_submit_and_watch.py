"""Journey 1: alice submits research.batch from the form and watches it finish, live, on
the task list and on its page, neither of which is reloaded."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from runtime import states
from runtime.models import AuditEvent, Step, Task
from tests.e2e.stack import EVENT_MS, EVENT_S, mark_page, screenshot, still_same_page
from tests.harness import wait_until

# Two experiments (each cools down for a second) and a short "overnight": every kind of
# status change (running, waiting, sleeping) for the pages to follow, well under a minute.
QUESTION = "Does the e2e batch finish while alice watches?"
INPUT = {"question": QUESTION, "experiments": 2, "overnight_seconds": 3}
TASK_URL = re.compile(r"/tasks/([0-9a-f-]{36})/$")


def fill_research_input(page: Page, values: dict) -> None:
    """Fill research.batch's input from its schema's fields (`in.<property>`), as a
    person would. They appear once the agent is picked (an htmx swap): wait for them, or
    a fill could land in the fields the swap is about to replace."""
    expect(page.locator('[name="in.question"]')).to_be_visible(timeout=EVENT_MS)
    for name, value in values.items():
        page.fill(f'[name="in.{name}"]', str(value))
    assert page.input_value("textarea[name=input]") == ""  # the fields, not JSON, carry the input


def refusal(page: Page) -> str:
    """What the form says when it refuses the submission, if anything."""
    error = page.locator("#form-error, [role=alert]")
    return error.first.inner_text() if error.count() else ""


def test_alice_submits_a_research_batch_and_watches_it_complete_without_a_reload(person, fleet, results_service):
    # No worker yet: the batch waits, queued, until both pages watch it (and the journal
    # is opened empty, so its live part must also replace the "no steps" state).
    fleet.supervisors(1)
    page = person("alice", shoot="login")
    page.goto("/tasks/new/")
    page.select_option("select[name=agent]", "research.batch")
    fill_research_input(page, INPUT)
    screenshot(page, "submit")
    with page.expect_navigation(timeout=EVENT_MS):
        page.get_by_role("button", name="Submit task").click()
    assert TASK_URL.search(page.url), f"the form did not lead to the task: {refusal(page)!r} at {page.url}"
    task_id = TASK_URL.search(page.url).group(1)

    task = Task.objects.get(id=task_id)
    assert (task.agent, task.tenant, task.owner) == ("research.batch", "acme", "user:alice")
    assert {k: task.input[k] for k in INPUT} == INPUT

    # A second window on the list, beside the task's own page: both watch the same run.
    listing = person("alice")
    listing.goto("/tasks/")
    row = listing.locator(f"#task-{task_id}")
    header = page.locator("#task-status")
    for watching in (page, listing):
        mark_page(watching)
        assert watching.evaluate("document.visibilityState") == "visible"  # a hidden tab pauses polling
    # Still under way as the watching starts, or "without a reload" would prove nothing.
    assert Task.objects.get(id=task_id).status == states.QUEUED
    expect(row).to_have_attribute("data-status", states.QUEUED)
    expect(header).to_have_attribute("data-status", states.QUEUED)
    fleet.workers(2)

    # The database first, so that a failure says which side is late: the run or the pages.
    wait_until(
        lambda: Task.objects.filter(id=task_id, status=states.COMPLETED).exists(),
        timeout=EVENT_S,
        message=f"the batch to complete (it is {Task.objects.get(id=task_id).status})",
    )
    expect(row).to_have_attribute("data-status", states.COMPLETED, timeout=EVENT_MS)
    expect(row.locator("td.status")).to_contain_text(states.COMPLETED)
    expect(header).to_have_attribute("data-status", states.COMPLETED, timeout=EVENT_MS)
    expect(header).to_contain_text(states.COMPLETED)
    assert still_same_page(page) and still_same_page(listing), "a page was reloaded or navigated away"
    assert re.search(rf"/tasks/{task_id}/$", page.url) and listing.url.endswith("/tasks/")

    # The journal the watched page grew holds every step, and no "no steps" row left
    # over from when it was opened (the empty state must go once steps arrive).
    for seq in Step.objects.filter(task_id=task_id).values_list("seq", flat=True):
        expect(page.locator(f"a[href$='/tasks/{task_id}/steps/{seq}/']").first).to_be_visible(timeout=EVENT_MS)
    expect(page.locator("#step-rows")).not_to_contain_text("No steps recorded yet", use_inner_text=True)

    # What the pages say is what the database holds: done, its results sent once.
    task.refresh_from_db()
    assert task.status == states.COMPLETED
    assert task.output["summary"]["completed"] == INPUT["experiments"]
    assert results_service.performed_by_key().get(task.output["receipt"]["key"]) == 1

    screenshot(listing, "task-list")
    screenshot(page, "task-detail")
    plan = Step.objects.get(task_id=task_id, name="plan")
    page.goto(f"/tasks/{task_id}/steps/{plan.seq}/")
    expect(page.locator("body")).to_contain_text("plan")
    screenshot(page, "step")
    event = AuditEvent.objects.filter(task_id=task_id, kind="task.completed").get()
    page.goto(f"/audit/{event.id}/")
    expect(page.locator("body")).to_contain_text("task.completed")
    screenshot(page, "audit-event")
    page.goto("/pools/")
    expect(page.locator("body")).to_contain_text("research")
    screenshot(page, "pools")
    page.goto("/")
    expect(page.locator("body")).to_contain_text("research")  # its pool, on the dashboard
    screenshot(page, "dashboard")
