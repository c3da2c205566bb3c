"""How the forms look in Chromium (issue 20, point 7): a bad `since` on the audit page
leaves alice on the audit page with the error under the filters and her other filters
kept (never a dead-end "Refused" page), and the link that drops it lists again; the
submit form's checkbox sits beside its words at the left, its titles are words
("Results URL"); narrowing a grant with no expiry reads on one line per label; the
schedules and webhooks filters sit in a card and offer the agents in a dropdown."""

from __future__ import annotations

from playwright.sync_api import expect

from runtime.authz.services import grant_create
from tests.e2e.stack import EVENT_MS

LINE_PX = 24  # one line of a label's 12 px text, with room


def test_a_bad_since_keeps_alice_on_the_audit_page_with_her_filters(person):
    page = person("alice")
    page.goto("/audit/?since=yesterday&actor=user:alice&kind=task.submitted")

    expect(page.locator("h1")).to_have_text("Audit trail")
    error = page.locator("#filter-error")
    expect(error).to_contain_text("since must be a date")
    expect(page.locator("form[role=search] [name=actor]")).to_have_value("user:alice")
    expect(page.locator("form[role=search] [name=kind]")).to_have_value("task.submitted")
    expect(page.locator("form[role=search] [name=since]")).to_have_value("yesterday")

    page.locator("#filter-clear").click()
    expect(page.locator("#filter-error")).to_have_count(0, timeout=EVENT_MS)
    assert "since=" not in page.url and "actor=user%3Aalice" in page.url
    expect(page.locator("form[role=search] [name=kind]")).to_have_value("task.submitted")


def test_the_submit_forms_checkbox_sits_beside_its_words_and_titles_are_words(person):
    page = person("alice")
    page.goto("/tasks/new/?agent=research.batch")

    box = page.locator('[name="in.approve_results"]')
    expect(box).to_be_visible(timeout=EVENT_MS)
    label = page.locator("label", has=box)
    words = label.locator("span").first
    expect(words).to_contain_text("Approve results")
    fieldset = page.locator("fieldset").first.bounding_box()
    box_at, words_at = box.bounding_box(), words.bounding_box()
    assert box_at["x"] - fieldset["x"] < 40, (box_at, fieldset)  # at the left, not centred
    assert abs((box_at["y"] + box_at["height"] / 2) - (words_at["y"] + words_at["height"] / 2)) < 10  # on its line
    assert words_at["x"] > box_at["x"]
    expect(page.locator("fieldset")).not_to_contain_text("Results Url")
    expect(page.locator("fieldset")).to_contain_text("Results URL")


def test_narrowing_a_grant_reads_one_line_a_label(person):
    grant = grant_create(
        tenant="acme", principal="agent:t.steps", action="tool.search", resource="repo:acme/*", actor="user:dave"
    )
    page = person("dave")
    page.goto(f"/grants/{grant.id}/narrow/")

    for name in ("resource", "expires_at"):
        words = page.locator("label", has=page.locator(f"[name={name}]")).locator("> span").first
        assert words.bounding_box()["height"] <= LINE_PX, name
    expect(page.locator("main")).not_to_contain_text("no later than never")


def test_schedules_and_webhooks_filter_in_a_card_with_an_agent_dropdown(person):
    page = person("alice")
    for path in ("/schedules/", "/webhooks/"):
        page.goto(path)
        form = page.locator("form[role=search]")
        assert form.evaluate("el => getComputedStyle(el).borderTopWidth") != "0px", path
        assert form.evaluate("el => getComputedStyle(el).backgroundColor") != "rgba(0, 0, 0, 0)", path
        expect(form.locator("select[name=agent] option", has_text="t.steps")).to_have_count(1)
        page.goto(f"{path}?state=nope&agent=t.steps")
        expect(page.locator("#filter-error")).to_contain_text("state must be active or paused")
        expect(page.locator("form[role=search] select[name=agent]")).to_have_value("t.steps")
