"""One task: header, lineage, the paged journal, and live updates that stop once it ends."""

from __future__ import annotations

from runtime import states
from runtime.models import Attempt, Task
from tests.console.world import steps, submit


def test_the_header_says_status_agent_owner_lease_holder_attempt_and_heartbeat(world, as_person):
    html = as_person(world.people.bob).get(f"/tasks/{world.parent.id}/").content.decode()
    assert '<span id="task-status" class="state big" data-status="running">running</span>' in html
    assert "<h1>Task" in html and "t.steps" in html and "user:alice" in html
    assert "vm:1" in html and "Attempt</dt><dd>1" in html and "expires in" in html


def test_an_expired_lease_is_marked(world, as_person):
    from datetime import timedelta

    from django.utils import timezone

    Attempt.objects.filter(task=world.parent).update(lease_expires_at=timezone.now() - timedelta(seconds=5))
    html = as_person(world.people.alice).get(f"/tasks/{world.parent.id}/").content.decode()
    assert '<span class="state act">expired</span>' in html


def test_the_lineage_lists_each_child_with_its_status(world, as_person):
    html = as_person(world.people.alice).get(f"/tasks/{world.parent.id}/").content.decode()
    assert f'<tr id="task-{world.child.id}" data-status="queued">' in html
    child = as_person(world.people.alice).get(f"/tasks/{world.child.id}/").content.decode()
    assert f'Child of <a href="/tasks/{world.parent.id}/"' in child


def test_a_blocked_task_links_the_effect_to_reconcile(world, as_person):
    html = as_person(world.people.alice).get(f"/tasks/{world.blocked.id}/").content.decode()
    assert f'href="/effects/{world.effect.id}/">reconcile #{world.effect.id}' in html
    assert f'<tr id="effect-{world.effect.id}" data-state="unknown">' in html


def test_a_long_journal_shows_its_first_page_and_pages_on(world, as_person):
    task = submit("acme", "alice", n=1)
    steps(task, 5000, error_at=4321)
    Task.objects.filter(id=task.id).update(epoch=2)
    client = as_person(world.people.alice)
    html = client.get(f"/tasks/{task.id}/").content.decode()
    assert 'id="step-0"' in html and 'id="step-99"' in html and 'id="step-100"' not in html
    assert "5000 steps" in html and "replayed" in html
    assert f'hx-get="/tasks/{task.id}/steps/?cursor=99"' in html
    fragment = client.get(f"/tasks/{task.id}/steps/?cursor=4300", headers={"HX-Request": "true"}).content.decode()
    assert 'id="step-4301"' in fragment and 'id="step-4300"' not in fragment
    assert "<details open><summary>ValueError: bad 4321" in fragment  # errors expanded
    assert '<tr id="steps-more" hx-swap-oob="true">' in fragment
    full = client.get(f"/tasks/{task.id}/steps/?cursor=4900")
    assert b"<h1>Journal of task" in full.content and b"Newer steps appear here" in full.content  # still live


def test_one_step_has_its_own_page(world, as_person):
    html = as_person(world.people.alice).get(f"/tasks/{world.parent.id}/steps/2/").content.decode()
    assert "<h1>Step #2" in html and "s2" in html
    assert as_person(world.people.alice).get(f"/tasks/{world.parent.id}/steps/9/").status_code == 404


def test_live_updates_answer_204_when_unchanged_and_stop_once_finished(world, as_person):
    client = as_person(world.people.alice)
    first = client.get(f"/tasks/{world.blocked.id}/live/", headers={"HX-Request": "true"})
    assert first.status_code == 200 and b'hx-trigger="every 2s' in first.content
    seen = first.content.decode().split('name="seen" value="')[1].split('"')[0]
    again = client.get(f"/tasks/{world.blocked.id}/live/?seen={seen}", headers={"HX-Request": "true"})
    assert again.status_code == 204
    Task.objects.filter(id=world.blocked.id).update(status=states.CANCELLED)
    finished = client.get(f"/tasks/{world.blocked.id}/live/?seen={seen}", headers={"HX-Request": "true"})
    assert finished.status_code == 286  # htmx: swap this, then stop polling
    assert b"hx-trigger" not in finished.content.split(b'id="task-rest"')[0]
    assert b'data-status="cancelled"' in finished.content


def test_the_lineage_tree_nests_grandchildren_under_their_parent(world, as_person):
    grandchild = Task.objects.create(
        agent="t.steps",
        input={},
        input_digest="x",
        tenant="acme",
        owner="user:alice",
        pool_id=world.parent.pool_id,
        parent=world.child,
        root=world.parent,
        spawn_seq=0,
        status=states.FAILED,
    )
    html = as_person(world.people.alice).get(f"/tasks/{world.parent.id}/").content.decode()
    child_at, grandchild_at = (
        html.index(f'<tr id="task-{world.child.id}"'),
        html.index(f'<tr id="task-{grandchild.id}"'),
    )
    assert child_at < grandchild_at
    assert 'class="indent-2" data-depth="2"' in html[grandchild_at : grandchild_at + 200]
    assert '<span class="state act">failed</span>' in html[grandchild_at:]


def test_a_finished_task_says_it_holds_no_authority_any_more_not_that_it_may_do_nothing(world, as_person):
    html = as_person(world.people.alice).get(f"/tasks/{world.done.id}/").content.decode()
    said = html.split('id="task-authority"')[1].split("</p>")[0]
    assert "finished" in said and "completed" in said and "no authority any more" in said
    assert "no live grant" not in said
    running = as_person(world.people.alice).get(f"/tasks/{world.parent.id}/").content.decode()
    assert "no authority any more" not in running.split('id="task-authority"')[1].split("</section>")[0]
