"""alice reads the approvals inbox while it changes under her (issue 20, point 2): she opens
a request's action, scrolls a row near the top and selects some of its text. Then
requests arrive and are decided elsewhere, one change per refresh: a new request (the
"1 new — show" bar shows in the room kept for it, no row is added or moved), an approve
(the row says consumed once the task acted on it), a deny of the request
whose action she has open, an expiry, an approve refused as stale, and another request
("2 new"). Each decided row changes its words where it stands, under `state=pending`
too, and after every refresh her scroll, the selected row's place, her selection and the
open action are as she left them, and the page was never reloaded.

Every change is real (a worker asks, a person decides, the sweep's expiry), so each poll
that swaps something is a refresh that had to keep her place; a refresh is counted when
htmx has settled a swap from /approvals/live/, never by waiting a fixed time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from console.dev.demo.fake_service import FakeService
from runtime import states
from runtime.approvals.services import approval_decide, approvals_expire_due
from runtime.authz.services import grant_create
from runtime.errors import ApprovalStale
from runtime.models import Approval
from tests.e2e.stack import EVENT_MS, EVENT_S, mark_page, screenshot, still_same_page
from tests.e2e.test_live_keeps_place import _PLACE, _SCROLL, _SELECT, SHORT
from tests.faults.support import submit
from tests.harness import wait_until

ASKED = 12  # enough rows that the inbox scrolls at SHORT
READ, OPENED = 5, 4  # the row she reads (newest first) and the one whose action she opens, just above it

_COUNT = """() => {
  window.__refreshes = 0;
  const counted = new WeakSet();
  document.body.addEventListener("htmx:afterSettle", (e) => {
    const xhr = e.detail.xhr, path = e.detail.pathInfo && e.detail.pathInfo.requestPath;
    if (xhr && !counted.has(xhr) && path && path.includes("/approvals/live/")) { counted.add(xhr); window.__refreshes++; }
  });
}"""


def waiting(task_ids, n: int) -> list[Approval]:
    return wait_until(
        lambda: (
            rows
            if len(rows := list(Approval.objects.filter(task_id__in=task_ids, state=states.PENDING).order_by("-id")))
            == n
            else None
        ),
        timeout=EVENT_S,
        message=f"{n} requests to be waiting",
    )


def decide(approval: Approval, decision: str) -> None:
    approval_decide(approval_id=approval.id, tenant="acme", actor="user:dave", decision=decision, comment="e2e")


def test_the_inbox_keeps_her_place_while_requests_arrive_and_are_decided_in_place(person, people, fleet):
    fleet.workers(2)
    with FakeService() as target:
        asked = [submit("t.approve", {"url": target.url, "amount": n}).task_id for n in range(ASKED)]
        rows = waiting(asked, ASKED)  # newest first, as the inbox lists them

        page = person("alice")
        page.set_viewport_size(SHORT)
        page.goto("/approvals/")
        expect(page.locator("#approval-rows tr")).to_have_count(ASKED)
        expect(page.locator("#approvals-live .pill")).to_have_count(0)
        mark_page(page)
        page.evaluate(_COUNT)

        read, opened = f"#approval-{rows[READ].id} td:nth-child(3)", f"#action-{rows[OPENED].id}"
        page.locator(f"{opened} > summary").click()
        expect(page.locator(opened)).to_have_attribute("open", "")
        assert page.evaluate(_SCROLL, read) > 0, "the inbox does not scroll: the test would prove nothing"
        assert page.evaluate(_SELECT, read).strip() == "t.approve"
        before = page.evaluate(_PLACE, [read, opened])
        moved = []

        def refreshed(change: str, wait) -> None:
            """After `change`, wait for what it shows (`wait`) and a settled refresh; note what moved."""
            start = page.evaluate("window.__refreshes")
            wait()
            page.wait_for_function("(n) => window.__refreshes > n", arg=start, timeout=EVENT_MS)
            after = page.evaluate(_PLACE, [read, opened])
            if after != before:
                moved.append(f"{change}: {before} -> {after}")
            expect(page.locator("#approval-rows tr")).to_have_count(ASKED)  # nothing inserted, nothing removed

        def row(n: int):
            return page.locator(f"#approval-{rows[n].id}")

        def reads(n: int, state: str, words: str) -> None:
            expect(row(n)).to_have_attribute("data-state", state, timeout=EVENT_MS)
            expect(row(n).locator("td.status")).to_contain_text(words)
            # Words carry the state; colour is for what needs action, and a decided request needs none.
            expect(row(n).locator(".state.act")).to_have_count(0)

        # 1. A request arrives: announced in the room kept for it, not inserted.
        asked.append(submit("t.approve", {"url": target.url, "amount": 99}).task_id)
        refreshed("a new request", lambda: expect(page.locator("#approvals-live .pill")).to_have_text("1 new — show"))

        # 2. dave approves the newest row; the worker acts on it at once (approved, then
        # consumed, often within one poll): the row says so in place.
        decide(rows[0], "approve")
        refreshed("an approve", lambda: reads(0, states.CONSUMED, "by user:dave"))

        # 3. He denies the request whose action she has open: its words change, the action stays open.
        decide(rows[OPENED], "deny")
        refreshed("a deny", lambda: reads(OPENED, states.DENIED, "by user:dave"))

        # 4. A request expires (the supervisor's sweep, called as it would be).
        Approval.objects.filter(id=rows[1].id).update(expires_at=timezone.now() - timedelta(seconds=1))
        assert approvals_expire_due(actor="system:supervisor") >= 1
        refreshed("an expiry", lambda: reads(1, states.EXPIRED, "nobody decided"))

        # 5. The agents' grants change, and an approve finds the request stale.
        grant_create(
            tenant="acme", principal="agent:t.approve", action="tool.search", resource="repo:acme/x", actor="user:dave"
        )
        with pytest.raises(ApprovalStale):
            decide(rows[2], "approve")
        refreshed("a stale request", lambda: reads(2, states.STALE, "stale"))

        # 6. Another request: the bar counts both, still in its room.
        asked.append(submit("t.approve", {"url": target.url, "amount": 98}).task_id)
        refreshed(
            "a second new request", lambda: expect(page.locator("#approvals-live .pill")).to_have_text("2 new — show")
        )

        expect(row(READ)).to_have_attribute("data-state", states.PENDING)
        expect(row(READ).locator(".state.act")).to_have_text("waiting for approval")
        assert page.evaluate("window.__refreshes") >= 3
        assert still_same_page(page), "the inbox was reloaded"
        assert not moved, "a live refresh moved her place: " + "; ".join(moved)
        assert page.locator("#announce").text_content() == "2 new requests"

        screenshot(page, "approvals-live")
        # "show" is the fresh inbox: the new requests at the top, the decided ones gone.
        page.locator("#approvals-live .pill").click()
        expect(page.locator("#approval-rows tr")).to_have_count(ASKED + 2 - 4)
        expect(page.locator("#approvals-live .pill")).to_have_count(0)
