"""What a live page's poll costs the database when nothing it shows has changed (issue 20,
point 15): the version of what the page shows is read first, in one statement, and the
page is built only when the version moved. Every signed-in request also reads its session,
its user and its membership (console/access): counted apart, as every page pays them."""

from __future__ import annotations

import re

from django.db import connection
from django.test.utils import CaptureQueriesContext

from runtime import states
from runtime.models import Step, Task
from runtime.stops.services import stop_ack, task_stop

SIGNED_IN = re.compile(r'FROM "(django_session|auth_user|steward_membership)"')


def seen_of(html: str) -> str:
    return html.split('name="seen" value="')[1].split('"')[0]


def poll(client, url: str) -> tuple[int, list[str]]:
    """The poll's status and the statements it ran beyond signing in."""
    with CaptureQueriesContext(connection) as ran:
        response = client.get(url, headers={"HX-Request": "true"})
    return response.status_code, [q["sql"] for q in ran.captured_queries if not SIGNED_IN.search(q["sql"])]


def test_an_unchanged_task_poll_reads_one_version_and_nothing_else_running_or_not(world, as_person):
    client = as_person(world.people.alice)
    for task in (world.blocked, world.parent):  # world.parent's attempt holds the lease
        url = f"/tasks/{task.id}/live/"
        status, _ = poll(client, url)
        assert status == 200
        seen = seen_of(client.get(url, headers={"HX-Request": "true"}).content.decode())
        status, ran = poll(client, f"{url}?seen={seen}")
        assert status == 204 and len(ran) <= 2, ran


def test_a_task_poll_builds_the_view_again_once_what_it_shows_changed(world, as_person):
    client = as_person(world.people.alice)
    url = f"/tasks/{world.parent.id}/live/"
    seen = seen_of(client.get(url, headers={"HX-Request": "true"}).content.decode())
    last = Step.objects.filter(task=world.parent).order_by("-seq").first()
    Step.objects.create(
        task=world.parent,
        seq=last.seq + 1,
        name="new",
        kind="step",
        output=1,
        epoch=last.epoch,
        started_at=last.started_at,
        finished_at=last.finished_at,
    )
    changed = client.get(f"{url}?seen={seen}", headers={"HX-Request": "true"})
    assert changed.status_code == 200 and seen_of(changed.content.decode()) != seen
    assert (
        client.get(f"{url}?seen={seen_of(changed.content.decode())}", headers={"HX-Request": "true"}).status_code == 204
    )


def test_an_unchanged_stop_panel_poll_reads_one_version_and_nothing_else(world, as_person):
    stop_id = task_stop(task_id=world.parent.id, actor="user:alice", reason="runaway", bound_seconds=600).stop_id
    client = as_person(world.people.alice)
    url = f"/stops/{stop_id}/panel/"
    seen = seen_of(client.get(url, headers={"HX-Request": "true"}).content.decode())
    status, ran = poll(client, f"{url}?seen={seen}")
    assert status == 204 and len(ran) <= 2, ran
    # The task page's panel shows the same version its own poll compares.
    page = client.get(f"/tasks/{world.parent.id}/").content.decode()
    assert seen_of(page[page.index('id="stop-panel"') :]) == seen


def test_a_stop_panel_poll_reads_the_panel_again_once_an_acknowledgment_came(world, as_person):
    stop_id = task_stop(task_id=world.parent.id, actor="user:alice", reason="runaway", bound_seconds=600).stop_id
    client = as_person(world.people.alice)
    url = f"/stops/{stop_id}/panel/"
    seen = seen_of(client.get(url, headers={"HX-Request": "true"}).content.decode())
    stop_ack(stop_id=stop_id, task_id=world.parent.id, boundary=states.WORKER, by="vm:1", detail={"ended": "cleanly"})
    changed = client.get(f"{url}?seen={seen}", headers={"HX-Request": "true"})
    assert changed.status_code in (200, 286) and f'id="ack-{world.parent.id}-worker" data-state="acknowledged"' in (
        changed.content.decode()
    )


def test_the_other_polls_cost_at_most_two_statements_when_nothing_changed(world, as_person):
    client = as_person(world.people.alice)
    # The journal's "newer steps" poll on a running task's page.
    last = Step.objects.filter(task=world.parent).order_by("-seq").first()
    status, ran = poll(client, f"/tasks/{world.parent.id}/steps/?cursor={last.seq}")
    assert status == 204 and len(ran) <= 2, ran
    # The task list's rows, each with the status it shows, and the "N new" it shows.
    rows = "&".join(f"row={t.id}.{t.status}" for t in (world.parent, world.child, world.done))
    newest = Task.objects.filter(tenant="acme").order_by("-id").first().id
    status, ran = poll(client, f"/tasks/live/?{rows}&newer=0&snapshot={newest}")
    assert status == 204 and len(ran) <= 2, ran


def test_an_unchanged_inbox_poll_costs_one_statement_whatever_it_shows(world, as_person):
    # The inbox's rows, each with the state it shows, and the "N new" it shows (none
    # after its snapshot: the newest request the page showed).
    client = as_person(world.people.alice)
    page = client.get("/approvals/").content.decode()
    live = page.split('id="approvals-live" class="live-bar room" hx-get="')[1].split('"')[0].replace("&amp;", "&")
    assert f"snapshot={world.approval.id}" in live
    status, ran = poll(client, f"{live}&row={world.approval.id}.pending&newer=0")
    assert status == 204 and len(ran) <= 2, ran
    # Soonest to expire first, filtered by agent: the same.
    status, ran = poll(
        client,
        f"/approvals/live/?state=any&order=expiry&agent={world.approval.agent}"
        f"&snapshot={world.approval.id}&row={world.approval.id}.pending&newer=0",
    )
    assert status == 204 and len(ran) <= 2, ran
