"""Triggers over the API: an operator makes, pauses and resumes schedules and webhooks
and makes dependency triggers; a viewer reads them but cannot change them; another
tenant's are not found."""

from __future__ import annotations

from runtime.models import AuditEvent, Schedule
from tests.api.conftest import Api

SCHEDULE = {
    "name": "nightly",
    "agent": "t.steps",
    "input": {"n": 1},
    "cron": "30 2 * * *",
    "timezone": "Europe/Paris",
    "missed_policy": "catch_up",
    "overlap_policy": "queue",
}


def test_an_operator_makes_a_schedule_and_sees_its_next_runs(tokens):
    alice = Api(tokens.alice)
    made = alice.post("schedules", SCHEDULE)
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["cron"] == "30 2 * * *" and len(body["next_runs"]) == 5 and body["owner"] == "user:alice"
    assert [s["name"] for s in Api(tokens.bob).get("schedules").json()] == ["nightly"]
    assert Api(tokens.alice).get("schedules", paused="true").json() == []
    assert Api(tokens.carol).get("schedules").json() == []
    assert Api(tokens.carol).get(f"schedules/{body['id']}").status_code == 404


def test_pause_and_resume_say_whether_they_changed_anything(tokens):
    alice = Api(tokens.alice)
    sid = alice.post("schedules", SCHEDULE).json()["id"]
    assert alice.post(f"schedules/{sid}/pause").json() == {"changed": True}
    assert alice.post(f"schedules/{sid}/pause").json() == {"changed": False}
    assert alice.get(f"schedules/{sid}").json()["next_runs"] == []
    assert alice.post(f"schedules/{sid}/resume").json() == {"changed": True}
    assert Schedule.objects.get(id=sid).paused is False
    assert AuditEvent.objects.filter(kind__in=["schedule.paused", "schedule.resumed"]).count() == 2


def test_a_viewer_cannot_change_triggers_and_another_tenant_cannot_find_them(tokens):
    sid = Api(tokens.alice).post("schedules", SCHEDULE).json()["id"]
    assert Api(tokens.bob).post("schedules", {**SCHEDULE, "name": "x"}).json()["code"] == "FORBIDDEN"
    assert Api(tokens.bob).post(f"schedules/{sid}/pause").json()["code"] == "FORBIDDEN"
    refused = Api(tokens.carol).post(f"schedules/{sid}/pause")
    assert (refused.status_code, refused.json()["code"]) == (404, "SCHEDULE_NOT_FOUND")


def test_a_bad_cron_or_zone_is_refused_with_its_code(tokens):
    alice = Api(tokens.alice)
    assert alice.post("schedules", {**SCHEDULE, "cron": "* * *"}).json()["code"] == "INVALID_CRON"
    assert alice.post("schedules", {**SCHEDULE, "timezone": "Moon/Base"}).json()["code"] == "INVALID_TIMEZONE"


def test_a_webhooks_secret_is_shown_once(tokens):
    alice = Api(tokens.alice)
    made = alice.post("webhooks", {"name": "github", "agent": "t.steps"})
    assert made.status_code == 201, made.content
    assert made.json()["secret"].startswith("whsec_") and made.json()["url"] == f"/hooks/{made.json()['id']}"
    again = alice.get(f"webhooks/{made.json()['id']}").json()
    assert "secret" not in again and "secret" not in alice.get("webhooks").json()[0]
    assert alice.get(f"webhooks/{made.json()['id']}/deliveries").json() == []
    assert Api(tokens.carol).get(f"webhooks/{made.json()['id']}").status_code == 404


def test_a_dependency_trigger_is_made_over_the_api(tokens):
    alice = Api(tokens.alice)
    task = alice.post("tasks", {"agent": "t.steps", "input": {}}).json()
    made = alice.post("dependencies", {"agent": "t.steps", "prerequisites": [task["id"]], "on_failure": "run"})
    assert made.status_code == 201, made.content
    assert made.json()["state"] == "waiting"
    assert [d["id"] for d in alice.get("dependencies", state="waiting").json()] == [made.json()["id"]]
