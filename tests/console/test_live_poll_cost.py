"""What a live page's poll costs the database when nothing it shows has changed (issue 20,
point 15): the version of what the page shows is read first, in one statement, and the
page is built only when the version moved. Every signed-in request also reads its session,
its user and its membership (console/access): counted apart, as every page pays them."""

from __future__ import annotations

import re
from datetime import timedelta

from django.db import connection
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext

from runtime import config, states
from runtime.models import Effect, Process, Step, Task
from runtime.stops.services import stop_ack, task_stop
from tests.console.world import submit

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


def unchanged_dashboard_poll(client) -> tuple[int, list[str]]:
    """The dashboard's refresh with the version it just showed. The version moves once a
    minute with the clock: a minute that turned between the two reads is read again."""
    for _ in range(2):
        seen = seen_of(client.get("/live/", headers={"HX-Request": "true"}).content.decode())
        status, ran = poll(client, f"/live/?seen={seen}")
        if status == 204:
            break
    return status, ran


def test_an_unchanged_dashboard_poll_reads_one_version_and_nothing_else(world, as_person):
    client = as_person(world.people.alice)
    assert poll(client, "/live/")[0] == 200  # without a version: the whole dashboard
    status, ran = unchanged_dashboard_poll(client)
    assert status == 204 and len(ran) <= 2, ran
    # The page shows the version its refresh compares.
    page = client.get("/").content.decode()
    assert seen_of(page[page.index('id="dashboard-now"') :]) == seen_of(
        client.get("/live/", headers={"HX-Request": "true"}).content.decode()
    )


def test_a_dashboard_poll_builds_the_dashboard_again_once_what_it_shows_changed(world, as_person):
    client = as_person(world.people.alice)
    seen = seen_of(client.get("/live/", headers={"HX-Request": "true"}).content.decode())
    submit("acme", "alice", n=1)
    changed = client.get(f"/live/?seen={seen}", headers={"HX-Request": "true"})
    assert changed.status_code == 200 and seen_of(changed.content.decode()) != seen
    assert 'data-status="queued"' in changed.content.decode()


def _unknown_effect(made: Effect, seq: int) -> None:
    """Another unknown effect of `made`'s task."""
    fields = ("task", "tenant", "effect_class", "keyed", "request_digest", "attempt", "epoch")
    Effect.objects.create(
        **{f: getattr(made, f) for f in fields},
        key=f"{made.task_id}/{seq}/send",
        step_seq=seq,
        name="send",
        state=states.UNKNOWN,
    )


def test_another_tenants_effect_leaves_the_dashboards_version_and_its_own_moves_it(world, as_person):
    """Unknown effects are a tenant's own (pools, which every tenant shares, are shown to all)."""
    client = as_person(world.people.alice)
    for seq in (1, 2):  # a minute turning between the reads moves it: read again
        seen = seen_of(client.get("/live/", headers={"HX-Request": "true"}).content.decode())
        _unknown_effect(world.other_effect, seq)  # globex's
        if client.get(f"/live/?seen={seen}", headers={"HX-Request": "true"}).status_code == 204:
            break
    else:
        raise AssertionError("globex's effect moved acme's dashboard version")
    _unknown_effect(world.effect, 1)  # acme's
    changed = client.get(f"/live/?seen={seen}", headers={"HX-Request": "true"})
    assert changed.status_code == 200 and seen_of(changed.content.decode()) != seen


def test_a_heartbeat_leaves_the_dashboards_version_and_a_worker_gone_silent_moves_it(world, as_person):
    """A beat moves only ages, which the page counts by itself (a <time data-ago> that
    static/console.js keeps counting); a worker with no beat within a lease is news."""
    worker = Process.objects.create(name="worker:vm:1", kind="worker", host="vm", pid=1)
    client = as_person(world.people.alice)
    for _ in range(2):  # a minute turning between the reads moves it: read again
        html = client.get("/live/", headers={"HX-Request": "true"}).content.decode()
        Process.objects.filter(pk=worker.pk).update(seen_at=Now())
        if client.get(f"/live/?seen={seen_of(html)}", headers={"HX-Request": "true"}).status_code == 204:
            break
    else:
        raise AssertionError("a heartbeat moved the dashboard's version")
    assert re.search(r'<td><time datetime="[^"]+" data-ago>[^<]+ ago</time></td>', html), "the worker's age"
    Process.objects.filter(pk=worker.pk).update(seen_at=Now() - timedelta(seconds=config.lease_seconds() + 1))
    changed = client.get(f"/live/?seen={seen_of(html)}", headers={"HX-Request": "true"})
    assert changed.status_code == 200 and ">silent</span>" in changed.content.decode()
