"""A paused tree in the console (the API: tests/api/test_breakers.py; the CLI:
tests/runtime/test_tree_pause.py): a held task's page says its tree is
paused, by which breaker at which task, how many it holds and how many still run; the
resume page lists every task lifting the pause will queue before anything is done; the
resume lifts it (audited as the page said); a viewer sees the pause and is offered
nothing; another tenant gets 404."""

from __future__ import annotations

from html import unescape

import pytest

from runtime import states
from runtime.models import AuditEvent, Task, TreePause
from tests.people import make_people
from tests.runtime.inprocess import run, submit

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def people():
    return make_people()


@pytest.fixture
def paused():
    """A grove whose bramble tripped max_children 1: the grove, the napper and the
    bramble's first child held."""
    root = submit("t.grove", {"saplings": 0, "steps": 0, "nap": 3600})
    run()
    pause = TreePause.objects.get(root_id=root)
    return root, pause


def held(root) -> list:
    return list(
        Task.objects.filter(root_id=root, status=states.BLOCKED, blocked_reason=states.TREE_PAUSED)
        .order_by("id")
        .values_list("id", flat=True)
    )


def test_a_held_tasks_page_says_its_tree_is_paused_by_what_and_offers_the_resume(people, as_person, paused):
    root, pause = paused
    html = as_person(people.alice).get(f"/tasks/{root}/").content.decode()
    assert f'id="tree-paused" data-pause="{pause.id}"' in html
    assert "Blocked: its tree is paused." in html and 'class="notice act"' in html
    assert f'href="/tasks/{pause.task_id}/"' in html and "fanout_children" in html
    assert "It holds 3 tasks" in html
    assert f'href="/tasks/{root}/resume/"' in html


def test_the_resume_page_lists_what_lifting_the_pause_queues_then_the_resume_does_that(people, as_person, paused):
    root, pause = paused
    client = as_person(people.alice)
    form = client.get(f"/tasks/{pause.task_id}/resume/").content.decode()
    others = held(root)
    assert "lifts the pause of its tree" in form and f"{len(others)} other tasks" in form
    for task_id in others:
        assert f'href="/tasks/{task_id}/"' in form
    assert 'name="limit"' in form  # the tripped task's own breaker: max_children
    assert held(root) == others  # reading the preview changed nothing

    response = client.post(
        f"/tasks/{pause.task_id}/resume/", {"reason": "two children are fine", "limit": "2"}, follow=True
    )
    assert response.status_code == 200
    assert f"Its tree's pause is lifted: {len(others)} other tasks queued again." in unescape(response.content.decode())
    pause.refresh_from_db()
    assert (pause.released_by, pause.released) == ("user:alice", len(others))  # the number the page showed
    event = AuditEvent.objects.filter(task_id=pause.task_id, kind="task.resumed").get()
    assert (event.data["tree_pause_lifted"], event.data["tree_queued"], event.data["via"]["channel"]) == (
        pause.id,
        len(others),
        "console",
    )
    assert not held(root)


def test_a_viewer_sees_the_pause_but_is_offered_no_resume_and_cannot_post_one(people, as_person, paused):
    root, pause = paused
    html = as_person(people.bob).get(f"/tasks/{root}/").content.decode()
    assert 'id="tree-paused"' in html and f'href="/tasks/{root}/resume/"' not in html
    response = as_person(people.bob).post(f"/tasks/{root}/resume/", {"reason": "x"})
    assert response.status_code in (403, 404)
    assert TreePause.objects.get(id=pause.id).released_at is None


def test_another_tenant_gets_404_for_a_paused_task(people, as_person, paused):
    root, _ = paused
    assert as_person(people.carol).get(f"/tasks/{root}/").status_code == 404
    assert as_person(people.carol).get(f"/tasks/{root}/resume/").status_code == 404


def test_the_dashboard_names_each_paused_tree_until_its_pause_is_lifted(people, as_person, paused):
    root, pause = paused
    html = as_person(people.alice).get("/").content.decode()
    assert 'id="paused-trees" class="notice act"' in html
    assert "1 tree paused by a fan-out breaker" in html and f'href="/tasks/{pause.task_id}/"' in html
    globex = as_person(people.carol).get("/").content.decode()
    assert 'id="paused-trees" class="muted">No tree is paused.' in globex  # another tenant's pause is not shown

    as_person(people.alice).post(f"/tasks/{pause.task_id}/resume/", {"reason": "go on", "limit": "2"})
    html = as_person(people.alice).get("/").content.decode()
    assert 'id="paused-trees" class="muted">No tree is paused.' in html
