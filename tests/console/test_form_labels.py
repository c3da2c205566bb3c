"""How the forms read: each label's words stay on one line (a label is a flex column, so
its text goes in one span), a checkbox sits beside its words, the submit form's field
titles are the schema's own or its names in words (never pydantic's "Results Url"), and
narrowing a grant with no expiry never says "no later than never"."""

from __future__ import annotations

import re

from console.ui.submit import title_of
from runtime.authz.services import grant_create


def test_a_field_is_titled_by_its_name_in_words_unless_the_schema_wrote_a_title():
    assert title_of("results_url", "Results Url") == "Results URL"  # pydantic's, taken as none
    assert title_of("approve_results", "Approve Results") == "Approve results"
    assert title_of("overnight_seconds", None) == "Overnight seconds"
    assert title_of("question", "Question") == "Question"
    assert title_of("q", "The question to research") == "The question to research"  # a person's title


def test_the_submit_form_titles_its_fields_and_puts_the_checkbox_beside_its_words(world, as_person):
    page = as_person(world.people.alice).get("/tasks/new/?agent=research.batch").content.decode()

    labels = " ".join(re.findall(r"<label[^>]*>(.*?)</label>", page, re.S))  # not the schema shown as JSON
    assert "Results Url" not in labels and "Results URL" in labels
    assert "Approve Results" not in labels
    checkbox = re.search(
        r'<label class="inline"><input type="checkbox" name="in.approve_results"[^>]*> <span>([^<]*)', page
    )
    assert checkbox and checkbox.group(1).strip() == "Approve results"
    # Each label's words are one element: a flex column breaks a bare text and a tag apart.
    for label in re.findall(r"<label>(.*?)<(?:input|select|textarea)", page, re.S):
        assert label.strip().startswith("<span>") or "<" not in label.strip(), label


def test_narrowing_a_grant_reads_as_one_line_and_never_says_no_later_than_never(world, as_person):
    grant = grant_create(
        tenant="acme", principal="agent:t.steps", action="tool.search", resource="repo:acme/*", actor="user:dave"
    )

    page = as_person(world.people.dave).get(f"/grants/{grant.id}/narrow/").content.decode()

    assert "no later than never" not in page
    assert "it never expires now, so any time narrows it" in page
    assert re.search(r'<label><span>Resource, within <span class="mono">repo:acme/\*</span></span>', page)
