"""The budgets screen: use in words, an operator's change through the same service as
the API (audited, conditional on the version the page showed), hostile values refused on
the form keeping what was typed, and no form for a viewer."""

from __future__ import annotations

import pytest

from runtime.limits.services import budget_set
from runtime.models import AuditEvent, Budget
from tests.snapshot import snapshot


def test_an_operator_sets_the_budgets_on_the_screen(world, as_person):
    client = as_person(world.people.alice)
    assert b"Save budgets" in client.get("/budgets/").content
    response = client.post(
        "/budgets/set/",
        {"task_tokens": "500", "tree_tokens": "", "tenant_tokens": "9000", "version": "0", "reason": "launch"},
    )
    assert response.status_code == 302
    b = Budget.objects.get(tenant="acme")
    assert (b.task_tokens, b.tree_tokens, b.tenant_tokens, b.version) == (500, None, 9000, 1)
    event = AuditEvent.objects.get(kind="budget.set")
    assert (event.actor, event.data["via"]["channel"], event.data["why"]) == ("user:alice", "console", "launch")
    assert b"within budget (0%)" in client.get("/budgets/").content


# (what was typed into task_tokens, the status, the code shown)
HOSTILE = [
    ("-3", 400, "ARGUMENT_OUT_OF_RANGE"),
    ("1.5", 400, "ARGUMENT_OUT_OF_RANGE"),
    ("1e9", 400, "ARGUMENT_OUT_OF_RANGE"),
    ("9" * 30, 400, "ARGUMENT_OUT_OF_RANGE"),
    ("1" + "0" * 16, 400, "ARGUMENT_OUT_OF_RANGE"),
    ("\u0661\u0662", 400, "ARGUMENT_OUT_OF_RANGE"),
]


@pytest.mark.parametrize(("typed", "status", "code"), HOSTILE)
def test_a_bad_budget_is_refused_on_the_form_keeping_what_was_typed(world, as_person, typed, status, code):
    client = as_person(world.people.alice)
    client.get("/budgets/")
    before = snapshot()
    response = client.post("/budgets/set/", {"task_tokens": typed, "version": "0"})
    assert response.status_code == status and b'id="form-error"' in response.content
    assert code.encode() in response.content and f'value="{typed}"'.encode() in response.content
    assert snapshot() == before


def test_a_page_drawn_before_someone_else_s_change_is_refused_409(world, as_person):
    client = as_person(world.people.alice)
    budget_set(tenant="acme", actor="user:dave", task_tokens=100)
    budget_set(tenant="acme", actor="user:dave", task_tokens=200)
    response = client.post("/budgets/set/", {"task_tokens": "5", "version": "1"})
    assert response.status_code == 409 and b"VERSION_CONFLICT" in response.content
    assert Budget.objects.get(tenant="acme").task_tokens == 200


def test_a_viewer_sees_the_use_without_the_form_and_cannot_post(world, as_person):
    client = as_person(world.people.bob)
    page = client.get("/budgets/").content
    assert b"Save budgets" not in page and b"the whole tenant" in page
    assert client.post("/budgets/set/", {"task_tokens": "1"}).status_code == 403
    assert not Budget.objects.exists()


def test_budgets_have_their_own_place_in_the_nav_and_the_dashboard_sends_people_there(world, as_person):
    client = as_person(world.people.alice)
    shown = client.get("/budgets/").content.decode()
    refused = client.post("/budgets/set/", {"task_tokens": "-3", "version": "0"}).content.decode()
    for html in (shown, refused):
        nav = html.split('<nav aria-label="Screens">')[1].split("</nav>")[0]
        assert '<a href="/budgets/" aria-current="page">Budgets</a>' in nav
        assert nav.count("aria-current") == 1
    dashboard = client.get("/").content.decode()
    said = dashboard.split("Operators change them")[1].split("</p>")[0]
    assert 'href="/budgets/"' in said
