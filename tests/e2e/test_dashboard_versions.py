"""Operators see agent versions on the dashboard (issue 23): the unfinished tasks per
version of research.digest, two versions served at once by a real worker, in words; and
the old version's task is upgraded from its page with the console's button."""

from __future__ import annotations

from playwright.sync_api import expect

from runtime import states
from runtime.models import Task
from runtime.tasks.services import task_submit
from tests.e2e.stack import EVENT_MS, screenshot
from tests.harness import wait_until

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}


def test_the_dashboard_shows_tasks_per_version_and_their_workers_and_the_old_task_is_upgraded(person, fleet):
    fleet.workers(1)
    old = task_submit(agent="research.digest", input={"topic": "optimizers"}, version="1", **ALICE).task_id
    new = task_submit(agent="research.digest", input={"topic": "schedulers"}, **ALICE).task_id
    wait_until(
        lambda: (
            set(Task.objects.filter(id__in=[old, new]).values_list("status", "agent_version"))
            == {(states.SLEEPING, "1"), (states.SLEEPING, "2")}
        ),
        timeout=60,
        message="both digests to start and sleep",
    )
    page = person("alice")
    page.goto("/")
    v1, v2 = page.locator('[id="version-research.digest-1"]'), page.locator('[id="version-research.digest-2"]')
    expect(v1).to_contain_text("1 sleeping", timeout=EVENT_MS)
    expect(v2).to_contain_text("1 sleeping")
    expect(v2).to_contain_text("current")
    for row in (v1, v2):  # the one worker serves both versions
        expect(row).to_contain_text("worker:")
        expect(row).not_to_contain_text("no live worker")
    expect(page.locator("#versions")).not_to_have_class("card act-border")  # nothing waits
    page.locator("#versions").scroll_into_view_if_needed()
    screenshot(page, "dashboard-versions")

    page.goto(f"/tasks/{old}/")
    expect(page.locator("#agent-version")).to_contain_text("Agent version 1, fixed when it started.")
    page.locator("#upgrade-button").click()
    expect(page.get_by_text("Upgraded from version 1 to 2.")).to_be_visible(timeout=EVENT_MS)
    expect(page.locator("#agent-version")).to_contain_text("Agent version 2")
    screenshot(page, "task-upgraded")
    assert Task.objects.get(id=old).agent_version == "2"
