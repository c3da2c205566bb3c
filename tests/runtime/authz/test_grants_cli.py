"""`manage.py steward grants ...`: people only (--actor user:<name>), reasons required,
the preview's count is the revoke's, and hostile arguments are refused with a stable
code (exit 2) and nothing written."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runtime.models import AuditEvent, Grant
from tests.runtime.authz.common import give, task
from tests.snapshot import snapshot

pytestmark = pytest.mark.django_db


def steward(*args: str, actor: str = "user:dave") -> str:
    out = io.StringIO()
    call_command("steward", "--actor", actor, "grants", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def refused(*args: str, actor: str = "user:dave") -> str:
    before = snapshot()
    with pytest.raises(CommandError) as error:
        steward(*args, actor=actor)
    assert error.value.returncode == 2
    assert snapshot() == before
    return str(error.value).split(":")[0]


def test_create_list_narrow_preview_and_revoke():
    made = steward(
        "create",
        "--tenant",
        "acme",
        "--principal",
        "agent:t.steps",
        "--action",
        "tool.search",
        "--resource",
        "repo:acme/*",
        "--expires",
        "2099-01-01T00:00Z",
    )
    grant = Grant.objects.get()
    assert f"granted #{grant.id}" in made and grant.granted_by == "user:dave"
    assert "repo:acme/*" in steward("list", "--tenant", "acme", "--principal", "agent:t.steps")
    steward("narrow", str(grant.id), "--tenant", "acme", "--resource", "repo:acme/docs", "--reason", "docs only")
    assert Grant.objects.get().resource == "repo:acme/docs"
    task()
    task()
    assert steward("preview", str(grant.id), "--tenant", "acme").startswith("2 live task(s)")
    assert "2 live task(s) reached" in steward("revoke", str(grant.id), "--tenant", "acme", "--reason", "done")
    event = AuditEvent.objects.get(kind="grant.revoked")
    assert (event.actor, event.data["reason"], event.data["affected_tasks"]) == ("user:dave", "done", 2)
    assert "grant.revoked" in steward("show", str(grant.id), "--tenant", "acme")
    assert steward("list", "--tenant", "acme").count("repo:acme") == 0
    assert "repo:acme/docs" in steward("list", "--tenant", "acme", "--state", "revoked")


@pytest.mark.parametrize(
    ("code", "args", "actor"),
    [
        (
            "GRANT_REQUIRES_PERSON",
            ["create", "--tenant", "acme", "--principal", "agent:t.steps", "--action", "tool.x", "--resource", "r"],
            "cli:root",
        ),
        ("GRANT_REQUIRES_PERSON", ["revoke", "{grant}", "--tenant", "acme", "--reason", "x"], "agent:t.steps"),
        ("INVALID_ARGUMENT", ["revoke", "{grant}", "--tenant", "acme"], "user:dave"),
        ("INVALID_ARGUMENT", ["revoke", "--tenant", "acme", "--reason", "x"], "user:dave"),
        ("GRANT_NOT_FOUND", ["revoke", "{grant}", "--tenant", "globex", "--reason", "x"], "user:dave"),
        ("ARGUMENT_OUT_OF_RANGE", ["revoke", str(2**64), "--tenant", "acme", "--reason", "x"], "user:dave"),
        ("INVALID_ARGUMENT", ["revoke", "seven", "--tenant", "acme", "--reason", "x"], "user:dave"),
        (
            "INVALID_RESOURCE_PATTERN",
            ["create", "--tenant", "acme", "--principal", "agent:t.steps", "--action", "tool.x", "--resource", "a*b"],
            "user:dave",
        ),
        (
            "INVALID_STRING",
            [
                "create",
                "--tenant",
                "acme",
                "--principal",
                "agent:t.steps",
                "--action",
                "tool.x",
                "--resource",
                "r" * 5000,
            ],
            "user:dave",
        ),
        (
            "INVALID_IDENTIFIER",
            ["create", "--tenant", "acme", "--principal", "robot:x", "--action", "tool.x", "--resource", "r"],
            "user:dave",
        ),
        (
            "ARGUMENT_OUT_OF_RANGE",
            [
                "create",
                "--tenant",
                "acme",
                "--principal",
                "agent:t.steps",
                "--action",
                "tool.x",
                "--resource",
                "r",
                "--expires",
                "2001-01-01T00:00Z",
            ],
            "user:dave",
        ),
        (
            "INVALID_ARGUMENT",
            [
                "create",
                "--tenant",
                "acme",
                "--principal",
                "agent:t.steps",
                "--action",
                "tool.x",
                "--resource",
                "r",
                "--expires",
                "2099-01-01T00:00",
            ],
            "user:dave",
        ),
        (
            "INVALID_ARGUMENT",
            [
                "create",
                "--tenant",
                "acme",
                "--principal",
                "agent:t.steps",
                "--action",
                "tool.x",
                "--resource",
                "r",
                "--expires",
                "tomorrow",
            ],
            "user:dave",
        ),
        (
            "INVALID_ENCODING",
            [
                "create",
                "--tenant",
                "acme",
                "--principal",
                "agent:t.steps",
                "--action",
                "tool.x",
                "--resource",
                "r\udcff",
            ],
            "user:dave",
        ),
        (
            "GRANT_NOT_NARROWER",
            ["narrow", "{grant}", "--tenant", "acme", "--resource", "repo:*", "--reason", "x"],
            "user:dave",
        ),
        ("INVALID_ARGUMENT", ["list", "--tenant", "acme", "--state", "gone"], "user:dave"),
    ],
)
def test_a_hostile_grants_command_is_refused_with_its_code_and_writes_nothing(code, args, actor):
    grant = give("agent:t.steps")
    assert refused(*[a.replace("{grant}", str(grant.id)) for a in args], actor=actor) == code
