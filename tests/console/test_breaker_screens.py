"""A task a breaker paused, in the console: its page says which breaker, its limit and
what was counted; the blocked filter lists it; its resume form raises that limit, a
hostile one is refused on the form with nothing changed; a viewer is offered nothing."""

from __future__ import annotations

import pytest

from runtime import states
from runtime.models import AuditEvent, Task
from tests.people import make_people
from tests.runtime.inprocess import run, submit

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def people():
    return make_people()


@pytest.fixture
def tripped():
    task_id = submit("t.loop", {"steps": 8})
    run()
    assert Task.objects.get(id=task_id).breaker == states.RUNAWAY_STEPS
    return task_id


def test_the_task_page_names_the_breaker_and_offers_a_resume_raising_it(people, as_person, tripped):
    html = as_person(people.alice).get(f"/tasks/{tripped}/").content.decode()
    assert 'id="blocked-breaker" data-breaker="runaway_steps"' in html
    assert '6 against <span class="mono">max_steps</span> = 5' in html
    assert f'href="/tasks/{tripped}/resume/"' in html
    listed = as_person(people.alice).get("/tasks/?status=blocked").content.decode()
    assert f"/tasks/{tripped}/" in listed


def test_the_resume_form_raises_the_tripped_limit_and_the_task_finishes(people, as_person, tripped):
    client = as_person(people.alice)
    form = client.get(f"/tasks/{tripped}/resume/").content.decode()
    assert 'id="tripped"' in form and 'name="limit"' in form
    response = client.post(f"/tasks/{tripped}/resume/", {"reason": "it needs eight", "limit": "8"})
    assert response.status_code == 302
    task = Task.objects.get(id=tripped)
    assert (task.status, task.breaker_limits) == (states.QUEUED, {"max_steps": 8})
    event = AuditEvent.objects.filter(task_id=tripped, kind="task.resumed").get()
    assert (event.data["limits"], event.data["breaker"], event.data["via"]["channel"]) == (
        {"max_steps": 8},
        states.RUNAWAY_STEPS,
        "console",
    )
    run()
    assert Task.objects.get(id=tripped).status == states.COMPLETED


@pytest.mark.parametrize("limit", ["0", "-3", "1e9", "99999999999999999999999", "eight", "٣"])
def test_a_hostile_limit_is_refused_on_the_form_keeping_what_was_typed(people, as_person, tripped, limit):
    response = as_person(people.alice).post(f"/tasks/{tripped}/resume/", {"reason": "more", "limit": limit})
    assert response.status_code == 400 and b"ARGUMENT_OUT_OF_RANGE" in response.content
    assert b">more</textarea>" in response.content
    task = Task.objects.get(id=tripped)
    assert (task.status, task.breaker_limits) == (states.BLOCKED, None)


def test_a_viewer_sees_the_breaker_but_is_offered_no_resume(people, as_person, tripped):
    html = as_person(people.bob).get(f"/tasks/{tripped}/").content.decode()
    assert 'id="blocked-breaker"' in html and f'href="/tasks/{tripped}/resume/"' not in html
    response = as_person(people.bob).post(f"/tasks/{tripped}/resume/", {"reason": "x", "limit": "8"})
    assert response.status_code in (403, 404)
    assert Task.objects.get(id=tripped).breaker_limits is None
