"""One rule for a filter that names an object: it answers as the object's own page
would. A task of another tenant, or no task, is TASK_NOT_FOUND (404) on every list that
takes one, never an empty page: an empty page would tell a client with a typo that all is
well, and a 404 tells a stranger no more than a task's own page does (CONVENTIONS,
example 11). Filters by name (agent, pool, actor, kind, principal) match text and never
404: an agent or a pool is not a tenant's object, and an actor may have left."""

from __future__ import annotations

import uuid

import pytest

from tests.api.conftest import Api, assert_error, openapi
from tests.api.world import make_world

# (list, the filter that names a task)
TASK_FILTERS = [
    ("tasks", "parent"),
    ("tasks", "root"),
    ("effects", "task"),
    ("audit", "task"),
    ("audit/export", "task"),
    ("decisions", "task"),
]
NOBODYS = "0190f4a2-8d1c-7c3e-9f10-2b6a1e7d4c55"


@pytest.fixture
def world(tokens):
    return make_world(tokens)


def test_the_table_names_every_list_filter_that_names_an_object():
    """A list route's query parameter holding an id names an object: it belongs in the
    table above, and so under the rule."""
    named = {
        (path.removeprefix("/api/v1/"), parameter["name"])
        for path, item in openapi()["paths"].items()
        for method, operation in item.items()
        if method == "get"
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "query"
        and any(branch.get("format") == "uuid" for branch in parameter["schema"].get("anyOf", [parameter["schema"]]))
    }
    assert named == set(TASK_FILTERS)


@pytest.mark.parametrize("path,name", TASK_FILTERS, ids=[f"{p}?{n}" for p, n in TASK_FILTERS])
def test_a_filter_naming_another_tenants_task_is_404_as_the_task_is(tokens, world, path, name):
    carol = Api(tokens.carol)
    assert_error(carol.get(f"tasks/{world.task.id}"), 404, "TASK_NOT_FOUND")  # the task's own page
    body = assert_error(carol.get(path, **{name: str(world.task.id)}), 404, "TASK_NOT_FOUND")
    assert body["details"] == {"task": str(world.task.id)}  # the id given, and nothing of the task


@pytest.mark.parametrize("path,name", TASK_FILTERS, ids=[f"{p}?{n}" for p, n in TASK_FILTERS])
def test_a_filter_naming_no_task_is_404(tokens, world, path, name):
    assert_error(Api(tokens.alice).get(path, **{name: NOBODYS}), 404, "TASK_NOT_FOUND")


@pytest.mark.parametrize("path,name", TASK_FILTERS, ids=[f"{p}?{n}" for p, n in TASK_FILTERS])
def test_a_filter_naming_our_task_answers_its_items(tokens, world, path, name):
    response = Api(tokens.alice).get(path, **{name: str(world.task.id)})
    assert response.status_code == 200, response.content[:300]


def test_filters_by_name_match_text_and_never_404(tokens, world):
    bob = Api(tokens.bob)
    for path, query in [
        ("tasks", {"agent": "no.such.agent"}),
        ("tasks", {"pool": "nosuch"}),
        ("audit", {"actor": "user:nobody"}),
        ("audit", {"kind": "no.such.kind"}),
        ("decisions", {"principal": "agent:no.such"}),
        ("approvals", {"agent": "no.such.agent"}),
        ("schedules", {"agent": "no.such.agent"}),
        ("grants", {"principal": "agent:no.such"}),
    ]:
        response = bob.get(path, **query)
        assert response.status_code == 200, (path, query, response.content[:200])
        body = response.json()
        assert (body["items"] if isinstance(body, dict) else body) == [], (path, query)


def test_the_console_keeps_the_same_rule(client, people, world):
    """The console's lists call the same selectors: carol's audit page filtered on our
    task is the 404 of a task she cannot see."""
    client.force_login(people.carol)
    assert client.get("/audit/", {"task": str(world.task.id)}).status_code == 404
    assert client.get("/tasks/", {"parent": str(world.task.id)}).status_code == 404
    assert client.get("/audit/", {"task": str(uuid.UUID(NOBODYS))}).status_code == 404
