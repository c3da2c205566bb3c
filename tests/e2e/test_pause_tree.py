"""alice finds a tree a fan-out breaker paused: a sapling's page says its tree is paused,
by which breaker at which task, and how many tasks it holds; on the tripped task's resume
page she reads which tasks lifting the pause will queue again, raises the limit, gives a
reason, and watches the root finish on its own page without reloading it. bob, a
viewer, sees the pause and no way to lift it (his POST: tests/console/test_tree_pause_screens.py).

The tree is tests/tree_agents.py's t.grove: two saplings taking paced steps on worker
processes, and a bramble whose second spawn trips max_children 1 while they run."""

from __future__ import annotations

from playwright.sync_api import expect

from runtime import states
from runtime.models import AuditEvent, Task, TreePause
from tests.e2e.stack import EVENT_MS, EVENT_S, mark_page, screenshot, still_same_page
from tests.faults.support import submit
from tests.harness import wait_until

REASON = "two children are within what this batch needs"


def test_alice_reads_what_a_paused_tree_holds_lifts_the_pause_and_watches_it_finish(person, people, fleet, tmp_path):
    fleet.workers(4)
    fleet.supervisors(1)
    root = submit(
        "t.grove", {"saplings": 2, "steps": 40, "pace": 0.05, "dir": str(tmp_path), "bramble_after": 0.5}
    ).task_id
    pause = wait_until(
        lambda: TreePause.objects.filter(root_id=root).first(), timeout=EVENT_S, message="the bramble to trip"
    )
    tree = Task.objects.filter(root_id=root)
    wait_until(
        lambda: not tree.filter(status=states.RUNNING).exists(),
        timeout=EVENT_S,
        message="the tree's running tasks to pause at their next step",
    )
    sapling = tree.filter(agent="t.sapling").first()
    holding = tree.filter(status=states.BLOCKED, blocked_reason=states.TREE_PAUSED).count()

    page = person("alice")
    page.goto(f"/tasks/{sapling.id}/")
    notice = page.locator("#tree-paused")
    expect(notice).to_contain_text("Blocked: its tree is paused.")
    expect(notice).to_contain_text("fanout_children")
    expect(notice).to_contain_text(f"It holds {holding} task")
    screenshot(page, "task-tree-paused")

    bob = person("bob")
    bob.goto(f"/tasks/{sapling.id}/")
    expect(bob.locator("#tree-paused")).to_contain_text("Blocked: its tree is paused.")
    expect(bob.locator("#tree-paused a", has_text="Resume")).to_have_count(0)

    page.goto(f"/tasks/{pause.task_id}/")
    expect(page.locator("#blocked-breaker")).to_contain_text("fanout_children")
    page.get_by_role("link", name="resume, raising the limit").click()
    expect(page.locator("#consequence")).to_contain_text("lifts the pause of its tree")
    expect(page.locator("#held li")).to_have_count(holding)
    expect(page.locator(f'#held a[href="/tasks/{root}/"]')).to_be_visible()
    assert TreePause.objects.get(id=pause.id).released_at is None  # reading the preview changed nothing
    page.locator("input[name=limit]").fill("2")
    page.locator("textarea[name=reason]").fill(REASON)
    screenshot(page, "task-resume-tree")
    page.get_by_role("button", name="Resume task").click()
    expect(page.locator(".messages")).to_contain_text("Its tree's pause is lifted")

    page.goto(f"/tasks/{root}/")
    mark_page(page)
    expect(page.locator("#task-status")).to_have_text("completed", timeout=EVENT_MS)
    assert still_same_page(page), "the root's page reloaded to show it finished"
    expect(page.locator("#tree-paused")).to_have_count(0)

    resumed = AuditEvent.objects.get(task_id=pause.task_id, kind="task.resumed")
    assert (resumed.actor, resumed.data["note"], resumed.data["tree_queued"], resumed.data["via"]["channel"]) == (
        "user:alice",
        REASON,
        holding,
        "console",
    )
    for name in ("sapling0", "sapling1"):
        assert (tmp_path / name).read_text().split() == [str(i) for i in range(40)], "each step ran once"
