"""The Django admin's narrow and revoke: a preview page first (the count the audit event
will record), then the same service with a reason, as the signed-in person, with the same
rights as the console: a superuser who is no admin of the grant's tenant changes nothing."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from runtime.authz.services import grant_create
from runtime.models import AuditEvent, Grant
from tests.console.world import World
from tests.snapshot import snapshot

LIST = "/admin/runtime/grant/"


@pytest.fixture
def grant(world: World):
    return grant_create(
        tenant="acme", principal="agent:t.steps", action="tool.search", resource="repo:acme/*", actor="user:dave"
    )


def _staff(user):
    user.is_staff = True
    user.save()
    user.user_permissions.add(Permission.objects.get(codename="view_grant"))
    return get_user_model().objects.get(id=user.id)


def _act(client, action, grant, **confirm):
    data = {"action": action, "_selected_action": [grant.id]}
    if confirm:
        data.update(confirm="yes", **confirm)
    return client.post(LIST, data)


def test_an_admin_of_the_tenant_previews_then_revokes_with_a_reason(world, grant, as_person):
    client = as_person(_staff(world.people.dave))
    preview = _act(client, "revoke_grants", grant)
    assert preview.status_code == 200
    shown = int(re.search(rb'data-count="(\d+)"', preview.content).group(1))
    assert shown == 3 and b"Effects already committed are not undone" in preview.content
    assert Grant.objects.get(id=grant.id).revoked_at is None  # the preview changed nothing
    done = _act(client, "revoke_grants", grant, reason="rotating keys")
    assert done.status_code == 302
    event = AuditEvent.objects.get(kind="grant.revoked")
    assert (event.actor, event.data["reason"], event.data["affected_tasks"], event.data["via"]["channel"]) == (
        "user:dave",
        "rotating keys",
        shown,
        "admin",
    )


def test_narrowing_from_the_admin(world, grant, as_person):
    client = as_person(_staff(world.people.dave))
    _act(client, "narrow_grants", grant, reason="docs only", resource="repo:acme/docs", expires_at="")
    assert Grant.objects.get(id=grant.id).resource == "repo:acme/docs"


@pytest.mark.parametrize("who", ["alice", "bob", "superuser"])
def test_a_person_without_the_right_changes_nothing_from_the_admin(world, grant, as_person, who):
    if who == "superuser":
        user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    else:
        user = _staff(getattr(world.people, who))
    client = as_person(user)
    client.get(LIST)
    before = snapshot()
    response = _act(client, "revoke_grants", grant, reason="mine now")
    assert response.status_code == 302
    after = snapshot()
    assert {k for k in before if before[k] != after[k]} <= {"django_session"}  # the error message only
    assert Grant.objects.get(id=grant.id).revoked_at is None


def test_a_revoke_without_a_reason_is_refused_from_the_admin(world, grant, as_person):
    client = as_person(_staff(world.people.dave))
    _act(client, "revoke_grants", grant, reason="  ")
    assert Grant.objects.get(id=grant.id).revoked_at is None
