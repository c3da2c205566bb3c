"""Pools (limits for operators) and API tokens (secret once, revoke)."""

from __future__ import annotations

from console.models import ApiToken
from runtime.models import AuditEvent, Pool


def test_pools_show_occupancy_and_an_operator_changes_limits(world, as_person):
    client = as_person(world.people.alice)
    pool = world.parent.pool_id
    assert f'<tr id="pool-{pool}">'.encode() in client.get("/pools/").content
    assert b"Save limits" in client.get(f"/pools/{pool}/").content
    response = client.post(f"/pools/{pool}/limits/", {"max_running": "7", "max_queued": "70"})
    assert response.status_code == 302
    assert (Pool.objects.get(name=pool).max_running, Pool.objects.get(name=pool).max_queued) == (7, 70)
    event = AuditEvent.objects.filter(kind="pool.limits").latest("id")
    assert event.actor == "user:alice" and event.data["via"]["channel"] == "console"


def test_a_bad_limit_is_refused_on_the_form_keeping_what_was_typed(world, as_person):
    response = as_person(world.people.alice).post(
        f"/pools/{world.parent.pool_id}/limits/", {"max_running": "-3", "max_queued": "5"}
    )
    assert response.status_code == 400 and b'value="-3"' in response.content and b'id="form-error"' in response.content


def test_a_viewer_sees_pools_without_the_limits_form_and_an_unknown_pool_is_404(world, as_person):
    client = as_person(world.people.bob)
    assert b"Save limits" not in client.get(f"/pools/{world.parent.pool_id}/").content
    assert client.get("/pools/no-such-pool/").status_code == 404


def test_a_token_secret_is_shown_once_and_only_its_hash_is_kept(world, as_person):
    client = as_person(world.people.alice)
    response = client.post("/tokens/new/", {"name": "nightly", "scope": "read", "expires_at": "2099-01-01"})
    assert response.status_code == 201 and response["Cache-Control"] == "no-store"
    secret = response.content.decode().split('id="token-secret" class="secret">')[1].split("<")[0]
    assert secret.startswith("stw_")
    token = ApiToken.objects.get(name="nightly")
    assert token.scope == "read" and token.expires_at.year == 2099 and secret.encode() not in bytes(token.digest)
    listing = client.get("/tokens/").content.decode()
    assert "nightly" in listing and secret not in listing and token.prefix in listing


def test_a_bad_token_form_is_refused_keeping_the_name(world, as_person):
    response = as_person(world.people.alice).post(
        "/tokens/new/", {"name": "x", "scope": "read", "expires_at": "2001-01-01"}
    )
    assert response.status_code == 400 and b"expires_at must be in the future" in response.content
    assert b'value="x"' in response.content


def test_revoking_a_token_marks_it_and_a_second_revoke_is_refused(world, as_person):
    client = as_person(world.people.alice)
    client.post("/tokens/new/", {"name": "once", "scope": "operate"})
    token = ApiToken.objects.get(name="once")
    assert client.post(f"/tokens/{token.id}/revoke/").status_code == 302
    assert ApiToken.objects.get(id=token.id).revoked_at is not None
    assert client.post(f"/tokens/{token.id}/revoke/").status_code == 409
    assert f'<tr id="token-{token.id}" data-revoked="true">' in client.get("/tokens/").content.decode()


def test_revoking_first_shows_what_it_will_do_and_changes_nothing(world, as_person):
    client = as_person(world.people.alice)
    client.post("/tokens/new/", {"name": "nightly", "scope": "read"})
    token = ApiToken.objects.get(name="nightly")

    html = client.get(f"/tokens/{token.id}/revoke/").content.decode()

    assert "refused (<code>401 AUTH_REQUIRED</code>) from its very next request" in html and "never been used" in html
    assert f'action="/tokens/{token.id}/revoke/"' in html and ApiToken.objects.get(id=token.id).revoked_at is None
    assert client.get(f"/tokens/{2**63}/revoke/").status_code == 404
    assert as_person(world.people.bob).get(f"/tokens/{token.id}/revoke/").status_code == 404  # not his


def test_someone_elses_token_is_not_found(world, as_person):
    as_person(world.people.alice).post("/tokens/new/", {"name": "mine", "scope": "read"})
    token = ApiToken.objects.get(name="mine")
    as_person(world.people.dave)  # an admin of acme may; an operator who is not the owner may not
    client = as_person(world.people.carol)
    assert client.post(f"/tokens/{token.id}/revoke/").status_code == 404


def test_a_viewer_makes_and_revokes_read_tokens_only(world, as_person):
    client = as_person(world.people.bob)
    form = client.get("/tokens/").content.decode().split('action="/tokens/new/"')[1].split("</form>")[0]
    assert '<option value="read"' in form and 'value="operate"' not in form

    made = client.post("/tokens/new/", {"name": "dashboard", "scope": "read"})
    assert made.status_code == 201 and b'id="token-secret"' in made.content
    token = ApiToken.objects.get(name="dashboard")
    assert (token.user, token.scope) == (world.people.bob, "read")

    refused = client.post("/tokens/new/", {"name": "wider", "scope": "operate"})
    assert refused.status_code == 403 and b'id="form-error"' in refused.content
    assert b"read tokens only" in refused.content and b"<code>FORBIDDEN</code>" in refused.content
    assert not ApiToken.objects.filter(name="wider").exists()

    assert f'href="/tokens/{token.id}/revoke/"' in client.get("/tokens/").content.decode()
    assert client.post(f"/tokens/{token.id}/revoke/").status_code == 302
    assert ApiToken.objects.get(id=token.id).revoked_at is not None
