"""Every list page's filters meet malformed, huge and out-of-range values: the answer is
the same list page (never the dead-end refusal page) with the error inline by the filters,
a 4xx with the refusal's stable code, and every other filter kept as typed, plus a link
that drops only the refused filter."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.console.world import World

LONG = "y" * 5000
NUL = "abc\x00def"
TASK = "01a23b00-0000-7000-8000-000000000000"  # a well formed id of no task
PARENT = "{parent}"  # the world's parent task: a filter that is fine, to be kept

# (name, path, query, the refused field, a kept filter's mark in the page, the code)
CASES = [
    ("audit: since not a date", "/audit/", {"since": "yesterday", "actor": "user:alice", "kind": "task.submitted"},
     "since", ['value="user:alice"', 'value="task.submitted"'], "INVALID_INPUT"),
    ("audit: until out of range", "/audit/", {"until": "99999-01-01", "actor": "user:alice"},
     "until", ['value="user:alice"'], "INVALID_INPUT"),
    ("audit: since as a qualifier", "/audit/", {"q": "since:2026-13-45 kind:task.submitted"},
     "since", ['value="since:2026-13-45 kind:task.submitted"', 'value="task.submitted"'], "INVALID_INPUT"),
    ("audit: task not an id", "/audit/", {"task": "not-a-uuid", "kind": "task.submitted"},
     "task", ['value="task.submitted"'], None),
    ("audit: NUL in actor", "/audit/", {"actor": NUL, "kind": "task.submitted"},
     "actor", ['value="task.submitted"'], "INVALID_INPUT"),
    ("audit: garbage cursor", "/audit/", {"cursor": "%%%", "kind": "task.submitted"},
     "cursor", ['value="task.submitted"'], None),
    ("tasks: created_after month 13", "/tasks/", {"created_after": "2026-13-45", "status": "completed", "agent": "t.steps"},
     "created_after", ["<option selected>completed</option>", "<option selected>t.steps</option>"], "INVALID_INPUT"),
    ("tasks: created_before huge", "/tasks/", {"created_before": LONG, "parent": PARENT},
     "created_before", [f'value="{PARENT}"'], "INVALID_INPUT"),
    ("tasks: status unknown", "/tasks/", {"status": "nope", "agent": "t.steps", "created_after": "2026-12-01"},
     "status", ["<option selected>t.steps</option>", 'value="2026-12-01"'], None),
    ("tasks: NUL in parent", "/tasks/", {"parent": NUL, "status": "completed"},
     "parent", ["<option selected>completed</option>"], "INVALID_INPUT"),
    ("tasks: root of no task", "/tasks/", {"root": TASK, "status": "completed"},
     "root", ["<option selected>completed</option>"], "TASK_NOT_FOUND"),
    ("tasks: garbage cursor", "/tasks/", {"cursor": "!!!" + LONG, "agent": "t.steps"},
     "cursor", ["<option selected>t.steps</option>"], None),
    ("effects: task not an id", "/effects/", {"task": "not-a-uuid", "state": "any", "effect_class": "irreversible"},
     "task", ["<option selected>irreversible</option>", 'value="any" selected'], None),
    ("effects: state huge", "/effects/", {"state": LONG, "effect_class": "irreversible"},
     "state", ["<option selected>irreversible</option>"], None),
    ("effects: class unknown", "/effects/", {"effect_class": "sometimes", "state": "any", "task": PARENT},
     "effect_class", [f'value="{PARENT}"'], None),
    ("approvals: order huge", "/approvals/", {"order": LONG, "agent": "t.steps", "state": "any"},
     "order", ["<option selected>t.steps</option>", 'value="any" selected'], None),
    ("approvals: state unknown", "/approvals/", {"state": "nope", "agent": "t.steps", "order": "expiry"},
     "state", ["<option selected>t.steps</option>", 'value="expiry" selected'], None),
    ("approvals: NUL in agent", "/approvals/", {"agent": NUL, "order": "expiry"},
     "agent", ['value="expiry" selected'], "INVALID_INPUT"),
    ("grants: state unknown", "/grants/", {"state": "nope", "action": "tool.search", "principal": "agent:t.steps"},
     "state", ['value="tool.search"', 'value="agent:t.steps"'], None),
    ("grants: principal malformed", "/grants/", {"principal": "robot", "action": "tool.search"},
     "principal", ['value="tool.search"'], None),
    ("grants: NUL in resource", "/grants/", {"resource": NUL, "action": "tool.search"},
     "resource", ['value="tool.search"'], None),
    ("decisions: outcome unknown", "/decisions/", {"outcome": "maybe", "boundary": "worker"},
     "outcome", ['value="worker" selected'], "INVALID_ARGUMENT"),
    ("decisions: boundary unknown", "/decisions/", {"boundary": "moat", "outcome": "denied"},
     "boundary", ['value="denied" selected'], "INVALID_ARGUMENT"),
    ("decisions: task not an id", "/decisions/", {"task": "not-a-uuid", "outcome": "denied"},
     "task", ['value="denied" selected'], None),
    ("decisions: principal huge", "/decisions/", {"principal": "agent:" + LONG, "boundary": "worker"},
     "principal", ['value="worker" selected'], None),
    ("decisions: garbage cursor", "/decisions/", {"cursor": "%%%", "outcome": "denied"},
     "cursor", ['value="denied" selected'], None),
    ("schedules: state unknown", "/schedules/", {"state": "nope", "agent": "t.steps"},
     "state", ["<option selected>t.steps</option>"], "INVALID_INPUT"),
    ("schedules: agent huge", "/schedules/", {"agent": LONG, "state": "paused"},
     "agent", ['value="paused" selected'], None),
    ("webhooks: state unknown", "/webhooks/", {"state": "nope", "agent": "t.steps"},
     "state", ["<option selected>t.steps</option>"], "INVALID_INPUT"),
    ("webhooks: agent huge", "/webhooks/", {"agent": LONG, "state": "active"},
     "agent", ['value="active" selected'], None),
    ("dependencies: state unknown", "/dependencies/", {"state": "nope"}, "state", ["<option selected>nope</option>"],
     "INVALID_INPUT"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "path", "query", "field", "kept", "code"), CASES, ids=[c[0] for c in CASES])
def test_a_refused_filter_is_shown_inline_with_the_others_kept(
    world: World, as_person, name, path, query, field, kept, code
):
    client = as_person(world.people.alice)
    query = {k: v.replace(PARENT, str(world.parent.id)) for k, v in query.items()}
    kept = [mark.replace(PARENT, str(world.parent.id)) for mark in kept]

    response = client.get(path, query)

    assert response.status_code in (400, 404), (name, response.status_code)
    page = response.content.decode()
    assert "<h1>Refused</h1>" not in page, name  # not the dead end
    assert 'role="search"' in page or 'class="filters' in page, name  # the list's own filters
    error = re.search(r'<p class="notice act" role="alert" id="filter-error" data-code="([A-Z_]+)"', page)
    assert error, f"{name}: no inline error"
    if code:
        assert error.group(1) == code, name
    for mark in kept:
        assert mark in page, f"{name}: the filter {mark!r} was not kept"
    # The way on: the same page without the refused filter, the others kept.
    clear = html.unescape(re.search(r'<a href="([^"]*)" id="filter-clear"', page).group(1))
    assert urlsplit(clear).path == path
    left = dict(parse_qsl(urlsplit(clear).query))
    if field is None:
        assert left == {}, name
    else:
        assert field not in left and "cursor" not in left, name
        if field not in query:  # a qualifier in the search box: the box keeps the rest
            assert f"{field}:" not in left.get("q", ""), name
        assert client.get(clear).status_code == 200, (name, clear)


def test_the_audit_page_with_a_bad_since_keeps_the_search_box_and_says_why(world, as_person):
    response = as_person(world.people.alice).get("/audit/", {"since": "yesterday", "actor": "user:alice"})

    page = response.content.decode()
    assert response.status_code == 400
    assert "since must be a date or a date-time" in page
    assert 'value="yesterday"' in page  # what was typed, to correct
    assert 'id="audit-table"' in page and "No events match." in page
