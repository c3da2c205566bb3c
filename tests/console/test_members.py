"""The members screen: every member reads who belongs with what role; dave the admin
adds a person, and changes a role or removes a member after a page that says what the
change does; the last admin stays; everyone else is refused."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from console.access import token_create, token_principal
from console.models import Membership
from runtime.errors import Unauthenticated
from runtime.models import AuditEvent
from tests.api.conftest import principal_of


def role_of(username: str, tenant: str = "acme") -> str | None:
    return Membership.objects.filter(user__username=username, tenant_id=tenant).values_list("role", flat=True).first()


def consequence(response) -> str:
    text = re.search(rb'<p id="consequence">(.*?)</p>', response.content, re.S).group(1).decode()
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", text))


def test_every_member_sees_the_list_with_role_since_and_last_sign_in(world, as_person):
    page = as_person(world.people.bob).get("/members/")
    assert page.status_code == 200
    for name, role in (("alice", "operator"), ("bob", "viewer"), ("dave", "admin")):
        assert f'<tr id="member-{name}" data-role="{role}">'.encode() in page.content
    assert b"Last sign-in" in page.content and b'href="/members/"' in page.content  # the nav item
    assert b"/members/add/" not in page.content and b"Remove" not in page.content


def test_an_admin_sees_the_add_form_and_each_rows_role_change_and_remove(world, as_person):
    page = as_person(world.people.dave).get("/members/").content
    assert b'action="/members/add/"' in page
    assert b'action="/members/bob/role/"' in page and b'href="/members/bob/remove/"' in page


def test_an_admin_adds_an_existing_person_and_the_audit_row_names_person_channel_and_session(world, as_person):
    client = as_person(world.people.dave)
    response = client.post("/members/add/", {"username": "carol", "role": "viewer"})
    assert response.status_code == 302 and role_of("carol") == "viewer"
    event = AuditEvent.objects.get(kind="member.added")
    assert event.actor == "user:dave" and event.data["person"] == "carol"
    assert event.data["via"]["channel"] == "console" and event.data["via"]["credential"].startswith("session:")


def test_adding_someone_already_a_member_is_refused_on_the_form_so_a_role_change_is_confirmed(world, as_person):
    response = as_person(world.people.dave).post("/members/add/", {"username": "bob", "role": "admin"})
    assert response.status_code == 409 and b"already viewer" in response.content
    assert b'value="bob"' in response.content and role_of("bob") == "viewer"


def test_adding_a_person_who_does_not_exist_is_refused_on_the_form(world, as_person):
    response = as_person(world.people.dave).post("/members/add/", {"username": "nobody", "role": "viewer"})
    assert response.status_code == 404 and b"PERSON_NOT_FOUND" in response.content


def test_the_role_page_says_what_the_change_does_before_anything_changes(world, as_person):
    response = as_person(world.people.dave).get("/members/bob/role/?role=operator")
    assert response.status_code == 200
    assert consequence(response) == (
        "bob becomes operator of acme: may submit, cancel, resume, resolve effects "
        "and change pool limits, from their next request on, in the console and the "
        "API alike."
    )
    assert role_of("bob") == "viewer" and not AuditEvent.objects.filter(kind__startswith="member.").exists()


def test_demoting_says_which_operate_tokens_turn_read_only(world, as_person):
    token_create(principal=principal_of(world.people.alice), name="ci", scope="operate")
    text = consequence(as_person(world.people.dave).get("/members/alice/role/?role=viewer"))
    assert text.startswith("alice becomes viewer of acme: may read everything")
    assert "Their operate tokens for acme (1) act as read tokens while they are a viewer." in text


def test_a_confirmed_role_change_is_audited_with_its_reason(world, as_person):
    client = as_person(world.people.dave)
    response = client.post("/members/bob/role/", {"role": "operator", "reason": "on call this week"})
    assert response.status_code == 302 and role_of("bob") == "operator"
    event = AuditEvent.objects.get(kind="member.role")
    assert event.data | {"via": None} == {
        "person": "bob",
        "from": "viewer",
        "role": "operator",
        "reason": "on call this week",
        "via": None,
    }
    assert event.actor == "user:dave" and event.data["via"]["channel"] == "console"


def test_the_remove_page_lists_the_tokens_that_stop_working(world, as_person):
    made = token_create(principal=principal_of(world.people.alice), name="nightly", scope="read").token
    response = as_person(world.people.dave).get("/members/alice/remove/")
    text = consequence(response)
    assert text.startswith(
        "alice loses access to acme at once, in the console and the API; 1 API token of theirs "
        "for acme is revoked with it and stays revoked if alice is added again."
    )
    assert f"{made.prefix}…".encode() in response.content and role_of("alice") == "operator"


def test_removing_a_member_ends_their_session_and_tokens_for_the_tenant_at_once(world, as_person):
    secret = token_create(principal=principal_of(world.people.alice), name="nightly", scope="read").secret
    alice = Client()
    alice.force_login(world.people.alice)
    assert alice.get("/").status_code == 200
    dave = as_person(world.people.dave)
    assert dave.post("/members/alice/remove/", {"reason": "left"}).status_code == 302
    assert role_of("alice") is None
    with pytest.raises(Unauthenticated):
        token_principal(f"Bearer {secret}")
    event = AuditEvent.objects.get(kind="member.removed")
    assert event.data["person"] == "alice" and event.data["reason"] == "left"
    assert event.data["tokens_revoked"] == [secret[:12]]
    assert alice.get("/").status_code == 401  # the same session: signed in, a member of no tenant any more


def test_the_last_admin_can_be_neither_demoted_nor_removed_and_the_page_says_so(world, as_person):
    client = as_person(world.people.dave)
    page = client.get("/members/dave/role/?role=operator")
    assert b'id="last-admin"' in page.content and b"Make dave operator</button>" not in page.content
    assert b'id="last-admin"' in client.get("/members/dave/remove/").content
    assert client.post("/members/dave/role/", {"role": "operator"}).status_code == 409
    response = client.post("/members/dave/remove/", {})
    assert response.status_code == 409 and b"LAST_ADMIN" in response.content
    assert role_of("dave") == "admin"


def test_with_another_admin_an_admin_may_step_down(world, as_person):
    client = as_person(world.people.dave)
    assert client.post("/members/alice/role/", {"role": "admin"}).status_code == 302
    assert b'id="last-admin"' not in client.get("/members/dave/role/?role=viewer").content
    assert client.post("/members/dave/role/", {"role": "viewer"}).status_code == 302
    assert role_of("dave") == "viewer"
    assert client.get("/members/alice/remove/").status_code == 403  # from the next request on


@pytest.mark.parametrize("url", ["/members/bob/role/?role=admin", "/members/bob/remove/"])
def test_an_operator_gets_403_on_the_confirmation_pages_and_their_posts(world, as_person, url):
    client = as_person(world.people.alice)
    assert client.get(url).status_code == 403
    assert client.post(url.split("?")[0], {"role": "admin"}).status_code == 403
    assert client.post("/members/add/", {"username": "carol", "role": "viewer"}).status_code == 403
    assert role_of("bob") == "viewer" and role_of("carol") is None


def test_an_admin_of_another_tenant_finds_no_acme_member(world, as_person):
    Membership.objects.filter(user=world.people.carol, tenant_id="globex").update(role="admin")
    client = as_person(world.people.carol)
    for url in ("/members/bob/role/?role=admin", "/members/bob/remove/", "/members/nobody/remove/"):
        assert client.get(url).status_code == 404, url
        assert client.post(url.split("?")[0], {"role": "admin"}).status_code == 404, url
    assert role_of("bob") == "viewer"


def test_an_unknown_role_is_refused(world, as_person):
    assert as_person(world.people.dave).get("/members/bob/role/?role=owner").status_code == 400
    assert get_user_model().objects.filter(username="bob").exists() and role_of("bob") == "viewer"
