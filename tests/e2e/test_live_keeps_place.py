"""alice reads live pages while they refresh: on a running task's page, its stop panel's
page, the dashboard and the task list, she opens a <details> (where the page has one),
scrolls down and selects some text; after at least three refreshes that each morph
new HTML into the page, all three are as she left them, and the page was never
reloaded (issue 20, point 2). And a journal row already on the page gets its "replayed"
mark when a new attempt starts, without a reload.

Each page's polls answer 204 while nothing changed (the seen version, the rows' statuses):
nothing is swapped then, and nothing could be lost. So the page's own requests are told
that everything changed (an htmx:configRequest listener the test adds), and each refresh
swaps the whole fragment in, as a busy task's would. A refresh is counted when htmx has
settled a swap from the page's live URL, never by waiting a fixed time."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from runtime import states
from runtime.models import Task
from runtime.stops.services import task_stop
from tests.e2e.stack import EVENT_MS, EVENT_S, mark_page, still_same_page
from tests.faults.support import submit
from tests.harness import wait_until

CYCLES = 3
SHORT = {"width": 1280, "height": 420}  # every page scrolls, however little it shows

# Count the swaps each live URL settled (one per response, however many elements it
# swapped out of band), and make every poll ask as if the page showed something else.
_WATCH = """(live) => {
  window.__refreshes = 0;
  const counted = new WeakSet();
  document.body.addEventListener("htmx:afterSettle", (e) => {
    const xhr = e.detail.xhr, path = e.detail.pathInfo && e.detail.pathInfo.requestPath;
    if (xhr && !counted.has(xhr) && path && path.includes(live)) { counted.add(xhr); window.__refreshes++; }
  });
  document.body.addEventListener("htmx:configRequest", (e) => {
    const p = e.detail.parameters;
    if (!e.detail.path.includes(live)) return;
    if (p.seen !== undefined) p.seen = "stale";
    if (p.row !== undefined) p.row = [].concat(p.row).map((r) => r.split(".")[0] + ".stale");
    if (p.newer !== undefined) p.newer = "-1";
  });
}"""

_SELECT = """(selector) => {
  const el = document.querySelector(selector);
  const range = document.createRange();
  range.selectNodeContents(el);
  getSelection().removeAllRanges();
  getSelection().addRange(range);
  return getSelection().toString();
}"""

_SCROLL = """(selector) => {
  const el = document.querySelector(selector);
  window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - 60);
  return window.scrollY;
}"""

_PLACE = """([selector, details]) => {
  const el = document.querySelector(selector), s = getSelection();
  return {
    scrollY: Math.round(window.scrollY),
    top: Math.round(el.getBoundingClientRect().top),
    selected: s.rangeCount === 1 && el.contains(s.anchorNode) ? s.toString() : null,
    open: details ? document.querySelector(details).open : null,
  };
}"""


def read_and_refresh(page: Page, *, live: str, select: str, details: str | None = None) -> str | None:
    """Open `details`, scroll `select` near the top and select its text; wait for CYCLES
    refreshes from `live`; say what moved, if anything did: the scroll, where the selected
    element is, the selection, whether the details are open."""
    page.evaluate(_WATCH, live)
    if details:
        page.locator(f"{details} > summary").click()
        expect(page.locator(details)).to_have_attribute("open", "")
    scrolled = page.evaluate(_SCROLL, select)
    assert scrolled > 0, f"{page.url} does not scroll at {SHORT}: the test would prove nothing"
    selected = page.evaluate(_SELECT, select)
    assert selected.strip(), f"nothing to select in {select}"
    before = page.evaluate(_PLACE, [select, details])
    start = page.evaluate("window.__refreshes")
    page.wait_for_function("(n) => window.__refreshes >= n", arg=start + CYCLES, timeout=EVENT_MS)
    after = page.evaluate(_PLACE, [select, details])
    assert still_same_page(page), f"{page.url} reloaded"
    return None if after == before else f"{page.url}: {before} -> {after}"


def test_live_pages_keep_open_details_scroll_and_selection_across_refreshes(person, people, fleet, tmp_path):
    # The worker never gives up its step: the task stays running, then stopping (its
    # stop waits for the worker's acknowledgment, far past this test).
    fleet.workers(1, env={"STEWARD_STOP_GRACE_SECONDS": "600"})
    task_id = submit("t.stoppable", {"dir": str(tmp_path), "how": "ignore", "note": "x" * 400}).task_id
    for n in range(12):  # rows for the task list; queued behind the one worker's task
        submit("t.steps", {"n": 1, "i": n})
    wait_until((tmp_path / "block").exists, timeout=EVENT_S, message="the task's step to be running on the worker")

    page = person("alice")
    page.set_viewport_size(SHORT)

    moved = []
    page.goto(f"/tasks/{task_id}/")
    expect(page.locator("#task-status")).to_have_text("running")
    mark_page(page)
    moved.append(
        read_and_refresh(page, live=f"/tasks/{task_id}/live/", select="#lineage h2", details="#task-input details")
    )

    stop = task_stop(task_id=task_id, actor="user:alice", reason="reading while it stops", bound_seconds=600)
    assert Task.objects.get(id=task_id).status == states.STOPPING
    page.goto(f"/stops/{stop.stop_id}/")
    expect(page.locator("#stop-state")).to_have_text("stopping")
    mark_page(page)
    moved.append(read_and_refresh(page, live=f"/stops/{stop.stop_id}/panel/", select="#effects-before h3"))

    # The task's page under its stop: the task's part and the stop panel both refresh.
    page.goto(f"/tasks/{task_id}/")
    expect(page.locator("#stop-panel")).to_be_visible()
    mark_page(page)
    moved.append(
        read_and_refresh(
            page, live=f"/stops/{stop.stop_id}/panel/", select="#lineage h2", details="#task-input details"
        )
    )

    page.goto("/")
    mark_page(page)
    moved.append(read_and_refresh(page, live="/live/", select="#workers h2"))

    page.goto("/tasks/")
    mark_page(page)
    moved.append(read_and_refresh(page, live="/tasks/live/", select="#task-rows tr:first-child td:nth-child(4)"))

    moved = [m for m in moved if m]
    assert not moved, f"{CYCLES} live refreshes moved the reader's place: " + "; ".join(moved)


def test_a_journal_row_on_the_page_is_marked_replayed_once_a_new_attempt_starts(person, people, fleet, tmp_path):
    first = fleet.workers(1)[0]
    fleet.supervisors(1)
    task_id = submit("t.stoppable", {"dir": str(tmp_path), "how": "block", "seconds": 600}).task_id
    wait_until((tmp_path / "block").exists, timeout=EVENT_S, message="the task's blocking step to be running")

    page = person("alice")
    page.goto(f"/tasks/{task_id}/")
    row = page.locator("#step-0")
    expect(row).to_contain_text("attempt 1")
    expect(row.locator(".tag", has_text="replayed")).to_be_hidden()
    mark_page(page)

    # The worker dies; its lease expires; a new worker's attempt 2 replays step #0.
    (tmp_path / "block").unlink()
    first.kill()
    fleet.workers(1, wait=False)  # busy in the blocking step at once, it may never answer a ping
    wait_until((tmp_path / "block").exists, timeout=EVENT_S, message="attempt 2 to reach the blocking step")
    assert Task.objects.get(id=task_id).epoch == 2

    expect(row.locator(".tag", has_text="replayed")).to_be_visible(timeout=EVENT_MS)
    expect(row).to_contain_text("attempt 1")
    assert still_same_page(page), "the mark came with a reload"
