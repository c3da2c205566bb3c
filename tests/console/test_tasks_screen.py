"""The task list: filters in the URL, cursor pages from a snapshot, live statuses."""

from __future__ import annotations

import re

from runtime import states
from runtime.models import Task
from tests.console.world import submit


def arriving(world) -> Task:
    """A task made now. Inside a test's one transaction the database clock stands still,
    so ids minted by steward_submit share a millisecond; one minted here is newer."""
    return Task.objects.create(
        agent="t.steps",
        input={},
        input_digest="x",
        tenant="acme",
        owner="user:alice",
        pool_id=world.parent.pool_id,
        status=states.QUEUED,
    )


def newest(tenant="acme") -> str:
    return str(Task.objects.filter(tenant=tenant).order_by("-id").values_list("id", flat=True)[0])


def row_ids(html: bytes) -> list[str]:
    return re.findall(r'<tr id="task-([0-9a-f-]{36})" data-status="', html.decode())


def test_the_list_shows_the_tenants_tasks_newest_first_with_status_words(world, as_person):
    html = as_person(world.people.bob).get("/tasks/").content
    ids = row_ids(html)
    assert ids == sorted(ids, reverse=True) and str(world.other.id) not in ids and str(world.done.id) in ids
    assert f'<tr id="task-{world.blocked.id}" data-status="blocked">'.encode() in html
    assert b'<td class="status"><span class="state act" data-status="blocked">blocked</span></td>' in html


def test_filters_live_in_the_url_so_a_link_shows_a_colleague_the_same_rows(world, as_person):
    client = as_person(world.people.alice)
    assert row_ids(client.get("/tasks/?status=blocked").content) == [str(world.blocked.id)]
    assert row_ids(client.get(f"/tasks/?parent={world.parent.id}").content) == [str(world.child.id)]
    assert row_ids(client.get(f"/tasks/?root={world.parent.id}").content) == [str(world.child.id)]
    html = client.get("/tasks/?status=blocked&agent=t.steps").content
    assert b"<option selected>blocked</option>" in html and b"<option selected>t.steps</option>" in html


def test_a_bad_filter_is_a_400_page_saying_why(world, as_person):
    response = as_person(world.people.alice).get("/tasks/?created_after=yesterday")
    assert response.status_code == 400 and b"created_after must be a date" in response.content
    assert as_person(world.people.alice).get("/tasks/?status=nope").status_code == 400


def test_cursor_pages_neither_skip_nor_repeat_while_new_tasks_arrive(world, as_person):
    for i in range(55):
        submit("acme", "alice", n=i)
    client = as_person(world.people.alice)
    first = client.get("/tasks/").content.decode()
    next_url = re.search(r'href="(\?[^"]*cursor=[^"]+)" rel="next"', first).group(1).replace("&amp;", "&")
    assert "snapshot=" in next_url
    arriving(world)  # between the pages
    second = client.get("/tasks/" + next_url).content
    seen = row_ids(first.encode()) + row_ids(second)
    assert len(seen) == len(set(seen)) == Task.objects.filter(tenant="acme").count() - 1


def test_the_live_fragment_answers_204_when_nothing_changed(world, as_person):
    client = as_person(world.people.alice)
    url = f"/tasks/live/?row={world.blocked.id}.blocked&row={world.parent.id}.running&newer=0&snapshot={newest()}"
    assert client.get(url, headers={"HX-Request": "true"}).status_code == 204


def test_the_live_fragment_swaps_only_the_rows_whose_status_moved_and_counts_new_ones(world, as_person):
    client = as_person(world.people.alice)
    Task.objects.filter(id=world.blocked.id).update(status=states.QUEUED)
    snapshot = newest()
    made = arriving(world)
    url = f"/tasks/live/?row={world.blocked.id}.blocked&row={world.parent.id}.running&newer=0&snapshot={snapshot}"
    response = client.get(url, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200
    assert f'<template>\n<tr id="task-{world.blocked.id}" data-status="queued" hx-swap-oob="morph">' in html
    assert f"task-{world.parent.id}" not in html  # unchanged: left alone
    assert "1 new" in html and str(made.id) not in html  # announced, not inserted
    assert 'id="task-live"' in html and 'hx-trigger="every 2s"' in html
