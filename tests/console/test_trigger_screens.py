"""The schedules and webhooks screens: alice makes, pauses and resumes a schedule and sees
its next runs; a webhook's secret is on the page that makes it and nowhere after; a
webhook's page lists its recent deliveries; filters live in the URL; bob sees but
cannot change them."""

from __future__ import annotations

import re
import time

from runtime.models import AuditEvent, Schedule, Webhook
from runtime.triggers.services import webhook_deliver
from runtime.triggers.webhooks import sign


def test_alice_makes_a_schedule_and_sees_its_next_runs_then_pauses_it(world, as_person):
    client = as_person(world.people.alice)
    made = client.post(
        "/schedules/new/",
        {
            "name": "nightly",
            "agent": "t.steps",
            "cron": "30 2 * * *",
            "timezone": "Europe/Paris",
            "missed_policy": "catch_up",
            "overlap_policy": "stop",
            "input": '{"n": 2}',
        },
    )
    schedule = Schedule.objects.get()
    assert made.status_code == 302 and made["Location"] == f"/schedules/{schedule.id}/"
    page = client.get(made["Location"]).content.decode()
    assert page.count("UTC</span></li>") == 10 and "Europe/Paris" in page and "catch_up" in page
    assert client.post(f"/schedules/{schedule.id}/pause/").status_code == 302
    assert Schedule.objects.get().paused
    assert "None while paused" in client.get(f"/schedules/{schedule.id}/").content.decode()
    row = f'id="schedule-{schedule.id}"'.encode()
    assert row in client.get("/schedules/?state=paused").content
    assert row not in client.get("/schedules/?state=active").content
    client.post(f"/schedules/{schedule.id}/resume/")
    assert not Schedule.objects.get().paused
    assert AuditEvent.objects.filter(kind__startswith="schedule.").count() == 3


def test_a_bad_cron_keeps_the_form_with_the_reason(world, as_person):
    client = as_person(world.people.alice)
    answer = client.post("/schedules/new/", {"name": "x", "agent": "t.steps", "cron": "99 * * * *"})
    assert answer.status_code == 400 and b"INVALID_CRON" in answer.content and b'value="99 * * * *"' in answer.content
    assert not Schedule.objects.exists()


def test_a_webhooks_secret_is_shown_once_and_its_deliveries_are_listed(world, as_person):
    client = as_person(world.people.alice)
    made = client.post("/webhooks/new/", {"name": "github", "agent": "t.steps"})
    assert made.status_code == 201 and made["Cache-Control"] == "no-store"
    secret = re.search(rb'id="webhook-secret" class="secret">(whsec_[^<]+)<', made.content).group(1).decode()
    hook = Webhook.objects.get()
    assert secret.encode() not in client.get("/webhooks/").content
    ts = str(int(time.time()))
    accepted = webhook_deliver(
        webhook_id=str(hook.id),
        timestamp=ts,
        signature=sign(secret, ts, b'{"n": 1}'),
        delivery_id="evt-1",
        body=b'{"n": 1}',
    )
    page = client.get(f"/webhooks/{hook.id}/").content
    assert b"evt-1" in page and str(accepted.task_id).encode() in page and secret.encode() not in page


def test_bob_sees_schedules_but_gets_no_buttons_and_cannot_make_one(world, as_person):
    as_person(world.people.alice).post("/schedules/new/", {"name": "nightly", "agent": "t.steps", "cron": "0 3 * * *"})
    client = as_person(world.people.bob)
    schedule = Schedule.objects.get()
    page = client.get(f"/schedules/{schedule.id}/").content
    assert b"nightly" in page and b"Pause</button>" not in page
    assert client.post("/schedules/new/", {"name": "mine", "agent": "t.steps", "cron": "0 3 * * *"}).status_code == 403
    assert client.post(f"/schedules/{schedule.id}/pause/").status_code == 403
    assert not Schedule.objects.get().paused


def test_dependency_triggers_are_listed_with_their_state_filter_in_the_url(world, as_person):
    from runtime.triggers.services import dependency_create

    made = dependency_create(
        tenant="acme",
        agent="t.steps",
        input={},
        owner="user:alice",
        actor="user:alice",
        prerequisites=[str(world.parent.id)],
        on_failure="run",
    )
    client = as_person(world.people.bob)
    row = f'id="dependency-{made.id}"'.encode()
    assert row in client.get("/dependencies/").content
    assert row in client.get("/dependencies/?state=waiting").content
    assert row not in client.get("/dependencies/?state=fired").content
    assert row not in as_person(world.people.carol).get("/dependencies/").content
