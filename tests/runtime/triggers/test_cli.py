"""`manage.py steward schedules|webhooks|dependencies`: the same services, from a terminal."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runtime.models import Schedule, Webhook


def steward(*args) -> str:
    out = io.StringIO()
    call_command("steward", "--actor", "cli:ops", *args, stdout=out)
    return out.getvalue()


def test_schedules_are_made_listed_shown_and_paused_from_the_cli(live):
    made = steward(
        "schedules",
        "create",
        "--tenant",
        "acme",
        "--name",
        "nightly",
        "--agent",
        "t.steps",
        "--cron",
        "0 3 * * *",
        "--timezone",
        "Europe/Paris",
        "--input",
        '{"n": 2}',
        "--missed",
        "catch_up",
    )
    schedule = Schedule.objects.get()
    assert str(schedule.id) in made and schedule.input == {"n": 2} and schedule.missed_policy == "catch_up"
    assert "nightly" in steward("schedules", "list", "--tenant", "acme")
    assert "next runs" in steward("schedules", "show", str(schedule.id))
    assert "paused schedule" in steward("schedules", "pause", str(schedule.id))
    assert "already paused" in steward("schedules", "pause", str(schedule.id))
    assert "resumed schedule" in steward("schedules", "resume", str(schedule.id))


def test_a_bad_cron_is_refused_with_its_code(live):
    with pytest.raises(CommandError, match="INVALID_CRON"):
        steward("schedules", "create", "--tenant", "acme", "--name", "x", "--agent", "t.steps", "--cron", "* *")
    assert not Schedule.objects.exists()


def test_a_webhooks_secret_is_printed_once_at_creation(live):
    made = steward("webhooks", "create", "--tenant", "acme", "--name", "gh", "--agent", "t.steps")
    assert "whsec_" in made
    hook = Webhook.objects.get()
    assert "whsec_" not in steward("webhooks", "show", str(hook.id))
    assert "whsec_" not in steward("webhooks", "list", "--tenant", "acme")
