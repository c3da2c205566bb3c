"""Members over the API: every member lists them; an admin's operate token adds a
person, changes a role and removes a member; the tenant's last admin can be neither
demoted nor removed; a removed member's tokens are refused at once."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from console.access import token_principal
from console.models import READ, ApiToken, Membership
from runtime.errors import Unauthenticated
from runtime.models import AuditEvent
from tests.api.conftest import Api, assert_error, make_token


@pytest.fixture
def dave(tokens) -> Api:
    return Api(tokens.dave)


def role_of(username: str, tenant: str = "acme") -> str | None:
    return Membership.objects.filter(user__username=username, tenant_id=tenant).values_list("role", flat=True).first()


def test_every_member_lists_the_tenants_members_with_role_and_dates(tokens):
    listed = Api(tokens.bob).get("members").json()
    assert [(m["username"], m["role"]) for m in listed] == [("alice", "operator"), ("bob", "viewer"), ("dave", "admin")]
    assert all(m["since"] and "last_login" in m for m in listed)
    assert [m["username"] for m in Api(tokens.carol).get("members").json()] == ["carol"]


def test_an_admin_adds_an_existing_person_and_the_audit_row_names_person_channel_and_token(dave, tokens):
    answered = dave.call("PUT", "members/carol", {"role": "viewer", "reason": "reviews acme's runs"})
    assert answered.status_code == 200, answered.content
    assert answered.json()["role"] == "viewer"
    assert role_of("carol") == "viewer" and role_of("carol", "globex") == "operator"
    event = AuditEvent.objects.filter(kind="member.added").get()
    assert (event.actor, event.tenant) == ("user:dave", "acme")
    assert event.data["person"] == "carol" and event.data["role"] == "viewer"
    assert event.data["reason"] == "reviews acme's runs"
    assert event.data["via"] == {"channel": "api", "credential": f"token:{tokens.dave[:12]}"}


def test_a_role_change_takes_effect_on_the_members_next_request(dave, tokens):
    assert dave.call("PUT", "members/alice", {"role": "viewer"}).json()["role"] == "viewer"
    assert_error(Api(tokens.alice).post("tasks", {"agent": "t.steps"}), 403, "FORBIDDEN")
    event = AuditEvent.objects.filter(kind="member.role").get()
    assert (event.data["person"], event.data["from"], event.data["role"]) == ("alice", "operator", "viewer")


def test_the_same_role_again_changes_nothing_and_writes_no_event(dave):
    before = AuditEvent.objects.count()
    assert dave.call("PUT", "members/bob", {"role": "viewer"}).status_code == 200
    assert AuditEvent.objects.count() == before


def test_adding_someone_who_does_not_exist_is_person_not_found(dave):
    assert_error(dave.call("PUT", "members/nobody", {"role": "viewer"}), 404, "PERSON_NOT_FOUND")


def test_the_last_admin_can_be_neither_demoted_nor_removed(dave):
    assert_error(dave.call("PUT", "members/dave", {"role": "operator"}), 409, "LAST_ADMIN")
    assert_error(dave.delete("members/dave"), 409, "LAST_ADMIN")
    assert role_of("dave") == "admin"
    assert not AuditEvent.objects.filter(kind__startswith="member.").exists()


def test_with_a_second_admin_the_first_may_step_down(dave):
    assert dave.call("PUT", "members/alice", {"role": "admin"}).status_code == 200
    assert dave.call("PUT", "members/dave", {"role": "operator"}).json()["role"] == "operator"
    assert role_of("dave") == "operator"
    # dave's operate token now stands for an operator: administering is refused from this request on.
    assert_error(dave.call("PUT", "members/bob", {"role": "operator"}), 403, "FORBIDDEN")


def test_an_admins_read_token_may_not_administer(people):
    read = Api(make_token(people.dave, scope=READ, name="read"))
    assert_error(read.call("PUT", "members/bob", {"role": "admin"}), 403, "FORBIDDEN")
    assert_error(read.delete("members/bob"), 403, "FORBIDDEN")
    assert role_of("bob") == "viewer"


def test_removing_a_member_refuses_their_tokens_at_once_and_revokes_them(dave, tokens, people):
    second = make_token(people.alice, name="second", scope=READ)
    assert Api(tokens.alice).get("tasks").status_code == 200
    answered = dave.delete("members/alice?reason=left+the+team")
    assert answered.status_code == 200, answered.content
    body = answered.json()
    assert (body["username"], body["role"]) == ("alice", "operator")
    assert sorted(body["tokens_revoked"]) == sorted([tokens.alice[:12], tokens.alice_read[:12], second[:12]])
    for secret in (tokens.alice, tokens.alice_read, second):
        assert_error(Api(secret).get("tasks"), 401, "AUTH_REQUIRED")
    assert role_of("alice") is None
    event = AuditEvent.objects.filter(kind="member.removed").get()
    assert event.actor == "user:dave" and event.data["person"] == "alice" and event.data["reason"] == "left the team"
    assert sorted(event.data["tokens_revoked"]) == sorted(body["tokens_revoked"])
    assert event.data["via"] == {"channel": "api", "credential": f"token:{tokens.dave[:12]}"}


def test_added_again_a_removed_member_does_not_get_their_old_tokens_back(dave, tokens):
    dave.delete("members/alice")
    assert dave.call("PUT", "members/alice", {"role": "operator"}).status_code == 200
    assert_error(Api(tokens.alice).get("tasks"), 401, "AUTH_REQUIRED")


def test_a_token_whose_owner_left_the_tenant_is_refused_even_unrevoked(tokens):
    """token_principal reads the membership on every request: a membership deleted behind
    the services' back (the Django admin) refuses the token too, revoked or not."""
    Membership.objects.filter(user__username="alice", tenant_id="acme").delete()
    assert ApiToken.objects.get(prefix=tokens.alice[:12]).revoked_at is None
    with pytest.raises(Unauthenticated):
        token_principal(f"Bearer {tokens.alice}")


def test_removing_a_member_of_another_tenant_is_not_found(tokens):
    Membership.objects.filter(user__username="carol", tenant_id="globex").update(role="admin")
    carol = Api(tokens.carol)
    assert_error(carol.delete("members/bob"), 404, "MEMBER_NOT_FOUND")
    assert role_of("bob") == "viewer"


def test_removing_twice_is_not_found_the_second_time(dave):
    assert dave.delete("members/bob").status_code == 200
    assert_error(dave.delete("members/bob"), 404, "MEMBER_NOT_FOUND")


@pytest.mark.parametrize("username", ["a" * 151, "bad name", "x%00y"])
def test_a_username_that_cannot_be_one_is_a_422(dave, username):
    assert_error(dave.call("PUT", f"members/{username}", {"role": "viewer"}), 422, "INVALID_REQUEST")


def test_an_unknown_role_is_a_422_naming_the_field(dave):
    body = assert_error(dave.call("PUT", "members/bob", {"role": "owner"}), 422, "INVALID_REQUEST")
    assert body["details"]["fields"][0]["loc"] == ["body", "role"]
    assert get_user_model().objects.filter(username="bob").exists() and role_of("bob") == "viewer"
