"""alice stops a running task from its page: she reads what the stop will cover (the
task, nothing in flight, what it cannot undo), gives a reason, and watches the stop panel
fill in without the page reloading: storage, scheduler and gateway acknowledge in the
stop's own commit; the worker's step ignores the stop (it blocks the signal that would
interrupt it), so the worker row waits until the grace passes and the worker ends the
attempt by force; only then does the panel say cancelled. bob, a viewer, sees the panel but no Stop button, and his POST is 403."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from runtime import states
from runtime.models import AuditEvent, StopAck, Task
from tests.e2e.stack import EVENT_MS, EVENT_S, csrf_token, mark_page, screenshot, still_same_page
from tests.faults.support import submit
from tests.harness import wait_until

REASON = "the experiment's budget ran out"


GRACE_S = 5  # how long the worker lets a step ignore a stop before it ends the attempt by force


def test_alice_stops_a_running_task_after_reading_the_preview_and_watches_the_panel_fill_in(
    person, people, fleet, tmp_path
):
    page = person("alice")
    # Two workers: the one running the task exits when it ends the attempt by force.
    fleet.workers(2, env={"STEWARD_STOP_GRACE_SECONDS": str(GRACE_S)})
    fleet.supervisors(1)
    task_id = submit("t.stoppable", {"dir": str(tmp_path), "how": "ignore"}).task_id
    wait_until(
        (tmp_path / "block").exists,
        timeout=EVENT_S,
        message="the task's step that ignores stops to be running on a worker",
    )

    page.goto(f"/tasks/{task_id}/")
    expect(page.locator("#task-status")).to_have_text("running", timeout=EVENT_MS)
    page.locator("#stop-button").click()

    expect(page.locator("#covered-count")).to_have_attribute("data-count", "1")
    expect(page.locator(f"#covered-{task_id}")).to_contain_text("running")
    expect(page.locator("#in-flight")).to_contain_text("0 effects with no outcome yet")
    expect(page.locator("#limits")).to_contain_text("effects already committed are not undone")
    assert Task.objects.get(id=task_id).status == states.RUNNING  # reading the preview changed nothing
    screenshot(page, "task-stop")
    page.locator("textarea[name=reason]").fill(REASON)
    page.get_by_role("button", name="Stop 1 task").click()

    panel = page.locator("#stop-panel")
    expect(panel).to_be_visible(timeout=EVENT_MS)
    mark_page(page)
    expect(panel).to_contain_text(REASON)
    expect(page.locator(f"#ack-{task_id}-storage")).to_have_attribute("data-state", "acknowledged")
    expect(page.locator(f"#ack-{task_id}-scheduler")).to_have_attribute("data-state", "acknowledged")
    # The worker is still inside the step, which ignores the stop: waiting, not over.
    expect(page.locator(f"#ack-{task_id}-worker")).to_have_attribute("data-state", "waiting")
    expect(page.locator("#stop-state")).to_have_text("stopping")
    screenshot(page, "task-stop-panel")

    # It fills in by itself: after the grace the worker ends the attempt by force and
    # says so, the panel's poll brings the row in place, and the stop is over.
    expect(page.locator(f"#ack-{task_id}-worker")).to_have_attribute("data-state", "acknowledged", timeout=EVENT_MS)
    expect(page.locator(f"#ack-{task_id}-worker")).to_contain_text("by force")
    expect(panel).to_have_attribute("data-over", "true", timeout=EVENT_MS)
    expect(page.locator("#stop-state")).to_have_text("cancelled")
    expect(page.locator("#stop-outcome")).to_contain_text("every boundary of every task acknowledged")
    assert still_same_page(page), "the panel filled in by reloading the page"
    expect(panel).not_to_have_attribute("hx-trigger", re.compile(".*"))  # no trigger: polling is over
    screenshot(page, "task-stopped")

    task = Task.objects.get(id=task_id)
    assert task.status == states.CANCELLED
    assert not (tmp_path / "next").exists()  # the step after it never started
    assert StopAck.objects.get(task_id=task_id, boundary=states.WORKER).detail["ended"] == "by force"
    assert set(StopAck.objects.filter(task_id=task_id).values_list("boundary", flat=True)) == set(
        states.STOP_BOUNDARIES
    )
    stopping = AuditEvent.objects.get(task_id=task_id, kind="task.stopping")
    assert (stopping.actor, stopping.data["reason"], stopping.data["via"]["channel"]) == (
        "user:alice",
        REASON,
        "console",
    )

    bob = person("bob")
    bob.goto(f"/tasks/{task_id}/")
    expect(bob.locator("#stop-panel")).to_be_visible()
    other = submit("t.steps", {"n": 1}).task_id  # live: alice would be offered Stop… here
    bob.goto(f"/tasks/{other}/")
    expect(bob.locator("#task-status")).to_be_visible()
    assert bob.locator("a[href*='/stop/'], form[action*='/stop/']").count() == 0
    token = csrf_token(bob)
    response = bob.request.post(
        f"/tasks/{other}/stop/",
        form={"reason": "bob tries"},
        headers={"X-CSRFToken": token, "Referer": bob.url},
        max_redirects=0,
    )
    assert response.status == 403
    assert Task.objects.get(id=other).status != states.STOPPING


def test_alice_uses_an_agents_kill_switch_after_its_preview_and_reopens_it(person, people, fleet):
    queued = [submit("t.sleeper", {"seconds": 600}).task_id for _ in range(2)]  # no worker: they stay queued
    page = person("alice")
    page.goto("/agents/t.sleeper/")
    expect(page.locator("#agent-switch")).to_have_attribute("data-submission", "open")
    page.locator("#kill-switch").click()
    expect(page.locator("#covered-count")).to_have_attribute("data-count", "2")
    for task_id in queued:
        expect(page.locator(f"#covered-{task_id}")).to_be_visible()
    screenshot(page, "agent-stop")
    page.locator("textarea[name=reason]").fill("incident 42: the sleeper loops")
    page.get_by_role("button", name="Stop 2 tasks and close submission").click()
    expect(page.locator("#stop-panel")).to_have_attribute("data-over", "true", timeout=EVENT_MS)
    expect(page.locator("#stop-state")).to_have_text("cancelled")
    assert all(Task.objects.get(id=t).status == states.CANCELLED for t in queued)

    page.goto("/agents/t.sleeper/")
    expect(page.locator("#agent-switch")).to_have_attribute("data-submission", "closed")
    expect(page.locator("#agent-switch")).to_contain_text("incident 42")
    screenshot(page, "agent-stopped")
    page.locator("#reopen-form input[name=reason]").fill("fixed")
    page.get_by_role("button", name="Reopen submission").click()
    expect(page.locator("#agent-switch")).to_have_attribute("data-submission", "open", timeout=EVENT_MS)
