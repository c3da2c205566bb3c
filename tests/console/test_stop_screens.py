"""The stop screens: the confirmation's preview, the stop panel in words (acknowledged,
waiting, past its bound, late), its live fragment (204 unchanged, 286 once over, never
reordered), the kill switch on the agent's page, and `stopping` in the list and the
dashboard."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from runtime import states
from runtime.models import AuditEvent, Effect, Task
from runtime.stops.services import stop_ack, stops_settle_due, task_stop
from tests.console.world import submit


def stopped(world, bound_seconds=None):
    started = task_stop(task_id=world.parent.id, actor="user:alice", reason="runaway", bound_seconds=bound_seconds)
    return started.stop_id


def row_ids(html: str) -> list[str]:
    return re.findall(r'<tr id="(ack-[^"]+)"', html)


def test_the_confirmation_lists_the_tree_and_the_effects_in_flight(world, as_person):
    at = world.parent.attempts.get()
    Effect.objects.create(
        key=f"{world.parent.id}/3/send",
        task=world.parent,
        tenant="acme",
        step_seq=3,
        name="send",
        effect_class="irreversible",
        keyed=False,
        state=states.INTENT,
        request_digest="ab" * 32,
        attempt=at,
        epoch=at.epoch,
        sends=1,
    )
    html = as_person(world.people.alice).get(f"/tasks/{world.parent.id}/stop/").content.decode()
    assert 'data-count="2"' in html and f'id="covered-{world.child.id}"' in html
    assert "<strong>1 effect with no outcome yet</strong>" in html and "#" in html and "send" in html
    assert "effects already committed are not undone" in html and 'name="reason"' in html


def test_the_panel_shows_each_boundary_in_words_and_cancelled_only_once_the_stop_is_over(world, as_person):
    stop_id = stopped(world)
    client = as_person(world.people.alice)
    html = client.get(f"/tasks/{world.parent.id}/").content.decode()
    panel = html[html.index('id="stop-panel"') :]
    assert 'data-state="stopping"' in panel and 'hx-trigger="every 2s' in panel
    assert f'id="ack-{world.parent.id}-worker" data-state="waiting"' in panel
    assert f'id="ack-{world.child.id}-worker" data-state="acknowledged"' in panel
    assert "Cancelled" not in panel and ">cancelled</span></div>" not in panel
    assert "Open so far: 1 acknowledgment still awaited" in panel

    seen = re.search(r'name="seen" value="([0-9a-f]+)"', panel).group(1)
    url = f"/stops/{stop_id}/panel/"
    assert client.get(url, {"seen": seen}, headers={"HX-Request": "true"}).status_code == 204  # nothing changed

    stop_ack(task_id=world.parent.id, boundary=states.WORKER, by="vm:1", detail={"ended": "cleanly at step 3"})
    final = client.get(url, {"seen": seen}, headers={"HX-Request": "true"})
    assert final.status_code == 286  # htmx stops polling: the stop is over
    body = final.content.decode()
    assert "hx-trigger" not in body and 'data-over="true"' in body and ">cancelled</span>" in body
    assert "every boundary of every task acknowledged" in body and "ended: cleanly at step 3" in body
    assert row_ids(body) == row_ids(panel)  # the rows never move


def test_a_boundary_past_its_bound_is_marked_and_the_outcome_names_what_was_left(world, as_person):
    stop_id = stopped(world, bound_seconds=0.1)
    Task.objects.filter(id=world.parent.id).update(stop_deadline=timezone.now() - timedelta(hours=1))
    client = as_person(world.people.alice)
    waiting = client.get(f"/stops/{stop_id}/").content.decode()
    assert "waiting: past its bound" in waiting and 'class="state act">waiting: past its bound' in waiting
    assert stops_settle_due(actor="supervisor") == 1
    over = client.get(f"/stops/{stop_id}/").content.decode()
    assert "Cancelled at its bound" in over and "never acknowledged: past its bound" in over
    assert "1 acknowledgment never came before the bound" in over
    stop_ack(task_id=world.parent.id, boundary=states.WORKER, by="vm:1", detail={"ended": "by force"}, stop_id=stop_id)
    assert "late: after the bound cancelled the task" in client.get(f"/stops/{stop_id}/").content.decode()


def test_effects_committed_before_the_stop_and_in_flight_are_listed_apart(world, as_person):
    at = world.parent.attempts.get()
    for seq, state, settled in (
        (3, states.COMMITTED, timezone.now() - timedelta(seconds=5)),
        (4, states.UNKNOWN, None),
    ):
        Effect.objects.create(
            key=f"{world.parent.id}/{seq}/e",
            task=world.parent,
            tenant="acme",
            step_seq=seq,
            name=f"e{seq}",
            effect_class="irreversible",
            keyed=False,
            state=state,
            request_digest="ab" * 32,
            attempt=at,
            epoch=at.epoch,
            sends=1,
            settled_at=settled,
        )
    stop_id = stopped(world)
    html = as_person(world.people.bob).get(f"/stops/{stop_id}/").content.decode()
    before = html[html.index('id="effects-before"') : html.index('id="effects-in-flight"')]
    in_flight = html[html.index('id="effects-in-flight"') :]
    # The effect's name as the list shows it ("#651 e3</a>"): a bare "e4" may also stand
    # inside a task id's hex digits.
    assert " e3</a>" in before and " e4</a>" not in before
    assert " e4</a>" in in_flight and 'class="state act">unknown' in in_flight and "reconcile" in in_flight


def test_a_viewer_sees_the_panel_but_no_stop_button_and_cannot_post(world, as_person):
    stopped(world)
    bob = as_person(world.people.bob)
    html = bob.get(f"/tasks/{world.parent.id}/").content.decode()
    assert 'id="stop-panel"' in html and "/stop/" not in html
    before = AuditEvent.objects.count()
    assert bob.post(f"/tasks/{world.child.id}/stop/", {"reason": "viewer"}).status_code == 403
    assert bob.post("/agents/t.steps/stop/", {"reason": "viewer"}).status_code == 403
    assert AuditEvent.objects.count() == before


def test_another_tenants_stop_is_not_found(world, as_person):
    stop_id = stopped(world)
    carol = as_person(world.people.carol)
    assert carol.get(f"/stops/{stop_id}/").status_code == 404
    assert carol.get(f"/stops/{stop_id}/panel/", headers={"HX-Request": "true"}).status_code == 404


def test_the_lineage_offers_a_stop_of_each_live_subtree(world, as_person):
    html = as_person(world.people.alice).get(f"/tasks/{world.parent.id}/").content.decode()
    assert f'href="/tasks/{world.child.id}/stop/"' in html and "Stop subtree…" in html


@pytest.mark.django_db(transaction=True)
def test_the_kill_switch_previews_stops_and_closes_then_reopens(world, as_person):
    client = as_person(world.people.alice)
    agent = client.get("/agents/t.steps/").content.decode()
    assert 'data-submission="open"' in agent and 'href="/agents/t.steps/stop/"' in agent
    confirm = client.get("/agents/t.steps/stop/").content.decode()
    assert f'id="covered-{world.parent.id}"' in confirm and f'id="covered-{world.child.id}"' in confirm
    assert client.post("/agents/t.steps/stop/", {"reason": " "}).status_code == 422
    response = client.post("/agents/t.steps/stop/", {"reason": "incident 7"})
    assert response.status_code == 302 and response["Location"].startswith("/stops/")
    assert Task.objects.get(id=world.child.id).status == states.CANCELLED
    assert Task.objects.get(id=world.other.id).status != states.CANCELLED  # globex is not touched
    agent = client.get("/agents/t.steps/").content.decode()
    assert 'data-submission="closed"' in agent and "incident 7" in agent and 'action="/agents/t.steps/reopen/"' in agent
    assert "submission closed" in client.get("/agents/").content.decode()
    refused = client.post("/tasks/new/", {"agent": "t.steps", "input": "{}"})
    assert refused.status_code == 409 and b"AGENT_STOPPED" in refused.content
    assert client.post("/agents/t.steps/reopen/", {"reason": "fixed"}).status_code == 302
    assert 'data-submission="open"' in client.get("/agents/t.steps/").content.decode()


def test_the_list_filters_stopping_and_the_dashboard_counts_it(world, as_person):
    stopped(world)
    client = as_person(world.people.alice)
    listed = client.get("/tasks/", {"status": "stopping"}).content.decode()
    assert "<option selected>stopping</option>" in listed
    assert str(world.parent.id) in listed and str(world.child.id) not in listed
    dashboard = client.get("/").content.decode()
    assert (
        '<li data-status="stopping" class=""><a href="/tasks/?status=stopping"><span class="n">1</span>' in dashboard
    ), dashboard[dashboard.index('id="counts"') :][:1500]


def test_a_never_stopped_task_has_no_panel(world, as_person):
    other = submit("acme", "alice", n=5)
    assert 'id="stop-panel"' not in as_person(world.people.alice).get(f"/tasks/{other.id}/").content.decode()


def test_a_cancelled_root_task_offers_a_new_run_linked_both_ways(world, as_person):
    done = submit("acme", "alice", n=7)
    task_stop(task_id=done.id, actor="user:alice", reason="wrong input")
    client = as_person(world.people.alice)
    assert f'href="/tasks/{done.id}/rerun/"' in client.get(f"/tasks/{done.id}/").content.decode()
    assert b"nothing of this run" in client.get(f"/tasks/{done.id}/rerun/").content
    assert client.post(f"/tasks/{done.id}/rerun/", {"reason": " "}).status_code == 422
    response = client.post(f"/tasks/{done.id}/rerun/", {"reason": "input fixed"})
    new = Task.objects.get(rerun_of=done.id)
    assert response.status_code == 302 and response["Location"] == f"/tasks/{new.id}/"
    assert f'href="/tasks/{done.id}/"' in client.get(f"/tasks/{new.id}/").content.decode()
    assert f'href="/tasks/{new.id}/"' in client.get(f"/tasks/{done.id}/").content.decode()
    event = AuditEvent.objects.get(task_id=done.id, kind="task.rerun")
    assert event.data["reason"] == "input fixed" and event.data["via"]["channel"] == "console"
    assert f'href="/tasks/{world.child.id}/rerun/"' not in client.get(f"/tasks/{world.child.id}/").content.decode()


def test_what_a_boundary_reported_reads_in_words_not_json(world, as_person):
    stopped(world)
    panel = as_person(world.people.alice).get(f"/tasks/{world.parent.id}/").content.decode()
    panel = panel[panel.index('id="stop-panel"') :]
    scheduler = panel[panel.index(f'id="ack-{world.child.id}-scheduler"') :]
    scheduler = scheduler[: scheduler.index("</tr>")]
    # Nothing reported as null, [] or false: "none" and "no" say it.
    assert "null" not in scheduler and "[]" not in scheduler and "false" not in scheduler
    assert "queued dropped: no" in scheduler or "queued dropped: yes" in scheduler
    gateway = panel[panel.index(f'id="ack-{world.child.id}-credential_gateway"') :]
    assert "in flight: none" in gateway[: gateway.index("</tr>")]
