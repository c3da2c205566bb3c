"""Stop (its former name, cancel) and resume from the console: the confirmation says what
they touch, a reason is required, a refusal keeps the dialog and the reason, the audit row
names the console. The stop panel itself: tests/console/test_stop_screens.py."""

from __future__ import annotations

from runtime import states
from runtime.models import AuditEvent, Task


def test_the_cancel_address_is_the_stop_confirmation_counting_the_task_and_its_live_children(world, as_person):
    html = as_person(world.people.alice).get(f"/tasks/{world.parent.id}/cancel/").content.decode()
    assert "<h1>Stop task" in html
    assert (
        'This stops <strong id="covered-count" data-count="2">2 live tasks</strong>: this t.steps task and '
        "its 1 live descendant"
    ) in html
    assert f'href="/tasks/{world.child.id}/"' in html and 'name="reason"' in html


def test_cancel_without_a_reason_keeps_the_dialog_open_with_the_message(world, as_person):
    response = as_person(world.people.alice).post(f"/tasks/{world.parent.id}/cancel/", {"reason": "  "})
    assert response.status_code == 422 and b'id="form-error"' in response.content
    assert b"the reason is kept in the stop and the audit trail" in response.content
    assert Task.objects.get(id=world.parent.id).status == states.RUNNING


def test_a_stop_cascades_and_writes_audit_rows_naming_the_person_and_the_console(world, as_person):
    response = as_person(world.people.alice).post(f"/tasks/{world.parent.id}/cancel/", {"reason": "wrong input"})
    assert response.status_code == 302 and response["Location"] == f"/tasks/{world.parent.id}/#stop-panel"
    # The parent's attempt is open: it waits for its worker; the queued child is cancelled at once.
    assert Task.objects.get(id=world.parent.id).status == states.STOPPING
    assert Task.objects.get(id=world.child.id).status == states.CANCELLED
    assert AuditEvent.objects.get(task_id=world.child.id, kind="task.cancelled").data["via"]["channel"] == "console"
    event = AuditEvent.objects.filter(task_id=world.parent.id, kind="task.stopping").get()
    assert event.actor == "user:alice" and event.data["reason"] == "wrong input"
    assert event.data["via"]["channel"] == "console" and event.data["via"]["credential"].startswith("session:")


def test_cancelling_a_finished_task_is_refused_on_the_form_keeping_the_reason(world, as_person):
    response = as_person(world.people.alice).post(f"/tasks/{world.done.id}/cancel/", {"reason": "too late"})
    assert response.status_code == 409
    assert b"INVALID_TRANSITION" in response.content and b">too late</textarea>" in response.content


def test_resume_queues_a_finished_task_and_says_it_touches_only_that_task(world, as_person):
    Task.objects.filter(id=world.done.id).update(status=states.FAILED)
    client = as_person(world.people.alice)
    assert b"<strong>this task only</strong>" in client.get(f"/tasks/{world.done.id}/resume/").content
    response = client.post(f"/tasks/{world.done.id}/resume/", {"reason": "fixed the service"})
    assert response.status_code == 302
    assert Task.objects.get(id=world.done.id).status == states.QUEUED
    event = AuditEvent.objects.get(task_id=world.done.id, kind="task.resumed")
    assert event.data["note"] == "fixed the service" and event.data["via"]["channel"] == "console"


def test_the_detail_shows_cancel_and_resume_only_where_they_apply_and_never_to_a_viewer(world, as_person):
    alice, bob = as_person(world.people.alice), None
    running = alice.get(f"/tasks/{world.parent.id}/").content
    assert b"/stop/" in running and b"/resume/" not in running
    Task.objects.filter(id=world.done.id).update(status=states.FAILED)
    failed = alice.get(f"/tasks/{world.done.id}/").content
    assert b"/resume/" in failed and b"/stop/" not in failed
    alice.logout()
    bob = as_person(world.people.bob)
    assert b"/stop/" not in bob.get(f"/tasks/{world.parent.id}/").content
    assert b"/resume/" not in bob.get(f"/tasks/{world.done.id}/").content


def test_after_a_stop_the_task_page_says_what_it_did_and_shows_the_panel(world, as_person):
    client = as_person(world.people.alice)
    page = client.post(f"/tasks/{world.parent.id}/stop/", {"reason": "enough"}, follow=True).content.decode()
    assert "Stop requested for 2 tasks: 1 cancelled at once, 1 waiting for their boundaries." in page
    assert 'id="stop-panel"' in page and 'data-status="stopping"' in page
