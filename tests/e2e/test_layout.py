"""The console fits a laptop's screen: at 1,024, 1,280 and 1,440 px wide, with the header's
"N unknown" badge showing and an audit event whose actor and data are very long, no page
scrolls sideways and the nav stays on one line. A long value is cut, and the whole of it
stays reachable: in the cell's title, and on the event's own page."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from runtime.audit import AuditKind
from runtime.models import AuditEvent
from runtime.trail.services import audit_record
from tests.e2e.stack import VIEWPORT

WIDTHS = (1024, 1280, 1400, 1440)
# One unbroken value, as a resource pattern or a URL would be: no space to wrap at.
LONG = "repo:acme/" + "very-long-repository-name-" * 8
LONG_ACTOR = "user:" + "a-person-with-a-long-name" * 7


def overflow(page) -> dict:
    """How far the page reaches past the viewport, and the nav's height against one item's."""
    return page.evaluate(
        """() => {
          const nav = document.querySelector('header.top nav');
          const item = nav.querySelector(':scope > a');
          const who = document.querySelector('header.top .who');
          return {
            scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
            nav: nav.getBoundingClientRect().height, item: item.getBoundingClientRect().height,
            navMiddle: nav.getBoundingClientRect().top + nav.getBoundingClientRect().height / 2,
            whoMiddle: who.getBoundingClientRect().top + who.getBoundingClientRect().height / 2,
          };
        }"""
    )


def test_no_page_overflows_and_the_nav_is_one_line_from_1024_px_with_the_badge_and_a_long_audit_value(person, acme):
    long_id = audit_record(
        actor=LONG_ACTOR, tenant="acme", kind=AuditKind.GRANT_CREATED, data={"resource": LONG, "note": LONG}
    )
    pages = [
        "/",
        "/tasks/",
        f"/tasks/{acme.done.id}/",
        f"/tasks/{acme.blocked.id}/",
        "/effects/",
        f"/effects/{acme.effect.id}/",
        "/approvals/",
        "/agents/",
        "/grants/",
        "/decisions/",
        "/schedules/",
        "/pools/",
        "/budgets/",
        "/audit/",
        f"/audit/{long_id}/",
        "/tokens/",
        "/members/",
        # and each kind of object's own page, and the forms
        "/tasks/new/",
        f"/tasks/{acme.done.id}/steps/{acme.seq}/",
        f"/stops/{acme.stop.id}/",
        f"/approvals/{acme.approval.id}/",
        f"/pools/{acme.pool}/",
        "/agents/t.steps/",
        f"/grants/{acme.grant.id}/",
        "/grants/new/",
        "/owners/alice/",
        f"/schedules/{acme.schedule.id}/",
        "/webhooks/",
        f"/webhooks/{acme.webhook.id}/",
        "/dependencies/",
    ]
    page = person("alice")
    problems = []  # every page and width at fault, not only the first
    try:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 800})
            for url in pages:
                page.goto(url)
                expect(page.locator("header.top .badge")).to_contain_text("1 unknown")
                seen = overflow(page)
                if seen["scroll"] > seen["inner"]:
                    problems.append(f"{url} at {width} px is {seen['scroll']} px wide")
                if seen["nav"] > seen["item"] + 1:
                    problems.append(f"the nav wraps at {width} px on {url}: {seen['nav']} px high")
                if abs(seen["navMiddle"] - seen["whoMiddle"]) > 4:
                    problems.append(f"the header wraps at {width} px on {url}")
            # The long values are cut in the list, and whole in the title and the event's page.
            page.goto("/audit/")
            row = page.locator(f"#audit-{long_id}")
            expect(row).to_be_visible()
            if LONG in row.inner_text() or not row.locator(f"[title*='{LONG}']").count():
                problems.append(f"at {width} px the long data is not cut with its whole in a title")
            if not row.locator(f"[title='{LONG_ACTOR}']").count():
                problems.append(f"at {width} px the long actor is not whole in a title")
        assert problems == [], "\n".join(problems)
        # The screens behind "More" open below the bar, inside the viewport, and it closes
        # again on a click elsewhere or Escape.
        page.set_viewport_size({"width": 1024, "height": 800})
        page.goto("/budgets/")
        more = page.locator("header.top details.more")
        expect(more.locator("summary")).to_have_class("current")  # the current screen is behind it
        more.locator("summary").click()
        menu = more.locator(".menu")
        for name in ("Agents", "Grants", "Decisions", "Triggers", "Pools", "Budgets", "API tokens", "Members"):
            expect(menu.get_by_role("link", name=name, exact=True)).to_be_visible()
        box = menu.bounding_box()
        assert box["x"] + box["width"] <= 1024, box
        page.locator("main h1").click()
        expect(menu).to_be_hidden()
        more.locator("summary").click()
        expect(menu).to_be_visible()
        page.keyboard.press("Escape")
        expect(menu).to_be_hidden()
        expect(more.locator("summary")).to_be_focused()
        more.locator("summary").click()
        menu.get_by_role("link", name="Pools", exact=True).click()
        expect(page).to_have_url(re.compile(r"/pools/$"))
        page.goto(f"/audit/{long_id}/")
        expect(page.locator("main")).to_contain_text(LONG)
        expect(page.locator("main")).to_contain_text(LONG_ACTOR)
        assert AuditEvent.objects.get(id=long_id).actor == LONG_ACTOR
    finally:
        page.set_viewport_size(VIEWPORT)
