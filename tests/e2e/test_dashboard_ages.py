"""The dashboard's refresh answers 204 while nothing it counts changed, and a worker's
heartbeat is not such a change: its "seen 2.0 s ago" must still count up in the browser
(static/console.js ticks each <time data-ago> against the server's clock), not stay
what the page said when it was last built (issue 20, point 15)."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.stack import EVENT_MS

# Count the dashboard refreshes by their answer: 204 (nothing swapped) or a swap.
_WATCH = """() => {
  window.__answers = {};
  document.body.addEventListener("htmx:afterRequest", (e) => {
    const path = e.detail.pathInfo && e.detail.pathInfo.requestPath;
    if (!path || !path.startsWith("/live/")) return;
    const status = e.detail.xhr.status;
    window.__answers[status] = (window.__answers[status] || 0) + 1;
  });
}"""
_AGE = "#workers time[data-ago]"


def test_a_workers_age_counts_up_while_the_dashboards_refresh_answers_204(person, fleet):
    fleet.workers(1)
    page = person("alice")
    page.goto("/")
    expect(page.locator(_AGE).first).to_be_visible(timeout=EVENT_MS)
    page.evaluate(_WATCH)
    page.wait_for_function("() => (window.__answers[204] || 0) >= 1", timeout=EVENT_MS)
    for _ in range(2):  # a minute turning builds the dashboard again: watch once more
        swaps = page.evaluate("() => window.__answers[200] || 0")
        before = page.locator(_AGE).first.text_content()
        page.wait_for_function(
            "(t) => document.querySelector('#workers time[data-ago]').textContent !== t", arg=before, timeout=EVENT_MS
        )
        if page.evaluate("() => window.__answers[200] || 0") == swaps:
            break
    else:
        raise AssertionError("the age moved only when the dashboard was built again")
    after = page.locator(_AGE).first.text_content()
    assert after.endswith(" ago") and after != before, (before, after)
    assert not page.csp_violations
