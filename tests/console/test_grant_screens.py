"""The people's side of authority in the console: who may change which grant (admins any,
operators an agent's only with the guardian right over its identity, viewers none), the
preview that says what a revoke reaches and counts what its audit event records, the
agent, grant, owner and decisions pages, and the task page's decisions with denials marked."""

from __future__ import annotations

import re

import pytest

from console.access import agent_steward_set
from runtime.authz.selectors import revocation_preview
from runtime.authz.services import authorize, grant_create
from runtime.models import Attempt, AuditEvent, Effect, Grant, Task
from tests.console.test_access import _principal
from tests.console.world import World
from tests.snapshot import refusal

AGENT = "agent:t.steps"


@pytest.fixture
def grants(world: World):
    """An agent grant and an owner grant given by dave (admin), a denial and an allow
    recorded against the parent task, and an in-flight (intent) effect of the parent."""
    agent = grant_create(
        tenant="acme", principal=AGENT, action="tool.search", resource="repo:acme/*", actor="user:dave"
    )
    owner = grant_create(
        tenant="acme", principal="user:alice", action="tool.search", resource="repo:*", actor="user:dave"
    )
    authorize(task=world.parent.id, action="tool.search", resource="repo:acme/docs", boundary="credential_gateway")
    authorize(task=world.parent.id, action="model.chat", resource="gpt", boundary="credential_gateway")
    running = Attempt.objects.get(task=world.parent)
    Effect.objects.create(
        key=f"{world.parent.id}/9/search",
        task=world.parent,
        tenant="acme",
        step_seq=9,
        name="search",
        effect_class="read",
        keyed=False,
        state="intent",
        request_digest="cd" * 32,
        attempt=running,
        epoch=running.epoch,
        sends=1,
    )
    return {"agent": agent, "owner": owner}


def _delegate(world, username="alice", allowed=True):
    agent_steward_set(
        principal=_principal(world.people.dave),
        name="t.steps",
        username=username,
        allowed=allowed,
        reason="on call for t.steps",
    )


def _revoke(client, grant, reason="rotating keys"):
    return client.post(f"/grants/{grant.id}/revoke/", {"reason": reason})


def test_an_operator_without_the_right_sees_no_button_and_is_refused_and_nothing_changes(world, grants, as_person):
    client = as_person(world.people.alice)
    page = client.get("/agents/t.steps/").content
    assert b"/revoke/" not in page and b"/narrow/" not in page
    assert client.get(f"/grants/{grants['agent'].id}/revoke/").status_code == 403
    assert refusal(lambda: _check(_revoke(client, grants["agent"]), 403)) == (None, [])


def test_an_operator_given_the_right_over_one_agent_may_revoke_its_grants_but_no_persons(world, grants, as_person):
    _delegate(world)
    client = as_person(world.people.alice)
    assert b"/revoke/" in client.get("/agents/t.steps/").content
    assert _revoke(client, grants["agent"]).status_code == 302
    assert Grant.objects.get(id=grants["agent"].id).revoked_by == "user:alice"
    assert refusal(lambda: _check(_revoke(client, grants["owner"]), 403)) == (None, [])
    assert refusal(
        lambda: _check(
            client.post(
                "/grants/new/", {"principal": "agent:research.batch", "action": "tool.search", "resource": "x"}
            ),
            403,
        )
    ) == (None, [])


def test_taking_the_right_back_refuses_the_next_change(world, grants, as_person):
    _delegate(world)
    _delegate(world, allowed=False)
    client = as_person(world.people.alice)
    assert _revoke(client, grants["agent"]).status_code == 403
    kinds = list(AuditEvent.objects.filter(kind__startswith="agent.steward").values_list("kind", "actor"))
    assert kinds == [("agent.steward_added", "user:dave"), ("agent.steward_removed", "user:dave")]


def test_the_right_is_for_operators_only(world):
    from tests.snapshot import refusal

    assert refusal(lambda: _delegate(world, username="bob")) == ("INVALID_ARGUMENT", [])  # bob is a viewer
    assert refusal(
        lambda: agent_steward_set(
            principal=_principal(world.people.alice), name="t.steps", username="alice", allowed=True
        )
    ) == ("FORBIDDEN", [])  # not an admin


def test_an_admin_previews_then_revokes_and_the_count_shown_is_the_count_recorded(world, grants, as_person):
    client = as_person(world.people.dave)
    page = client.get(f"/grants/{grants['agent'].id}/revoke/").content.decode()
    shown = int(re.search(r'data-count="(\d+)"', page).group(1))
    assert shown == revocation_preview(tenant="acme", grant_id=grants["agent"].id).count == 3
    for task in (world.parent, world.child, world.blocked):  # its own live tasks, and the child below one
        assert f'id="affected-{task.id}"' in page
    assert "1 call in flight" in page and "Effects already committed are not undone" in page
    assert _revoke(client, grants["agent"]).status_code == 302
    event = AuditEvent.objects.get(kind="grant.revoked")
    assert (event.actor, event.data["reason"], event.data["affected_tasks"]) == ("user:dave", "rotating keys", shown)
    assert event.data["via"]["channel"] == "console"
    grant_page = client.get(f"/grants/{grants['agent'].id}/").content.decode()
    assert 'data-state="revoked"' in grant_page and "rotating keys" in grant_page and "user:dave" in grant_page


def test_the_preview_counts_descendants_of_an_owners_tasks_and_ignores_other_owners(world, grants):
    preview = revocation_preview(tenant="acme", grant_id=grants["owner"].id)
    live_of_alice = Task.objects.filter(
        tenant="acme", owner="user:alice", status__in=["queued", "running", "sleeping", "waiting", "blocked", "dead"]
    )
    assert {t.id for t in preview.tasks} == set(live_of_alice.values_list("id", flat=True))


@pytest.mark.parametrize("reason", ["", "   "])
def test_a_revoke_without_a_reason_is_refused_keeps_the_dialog_and_writes_nothing(world, grants, as_person, reason):
    client = as_person(world.people.dave)
    holder = {}
    assert refusal(lambda: holder.setdefault("r", _revoke(client, grants["agent"], reason))) == (None, [])
    response = holder["r"]
    assert response.status_code == 400 and b'id="form-error"' in response.content
    assert b"Revoke grant #" in response.content  # the form is still there


def test_narrowing_from_the_page_records_before_after_and_why(world, grants, as_person):
    client = as_person(world.people.dave)
    response = client.post(
        f"/grants/{grants['agent'].id}/narrow/", {"resource": "repo:acme/docs", "reason": "docs only"}
    )
    assert response.status_code == 302
    assert Grant.objects.get(id=grants["agent"].id).resource == "repo:acme/docs"
    page = client.get(f"/grants/{grants['agent'].id}/").content.decode()
    assert "narrowed" in page and "docs only" in page and "repo:acme/*" in page


def test_a_revoked_grant_offers_nothing_to_revoke_again(world, grants, as_person):
    client = as_person(world.people.dave)
    _revoke(client, grants["agent"])
    again = client.get(f"/grants/{grants['agent'].id}/revoke/")
    assert b"INVALID_TRANSITION" in again.content and b'action="/grants/' not in again.content
    assert _revoke(client, grants["agent"]).status_code == 409


def test_the_agent_page_shows_grants_authority_tasks_and_denials_with_their_boundary(world, grants, as_person):
    page = as_person(world.people.bob).get("/agents/t.steps/").content.decode()
    assert f'id="grant-{grants["agent"].id}"' in page
    assert "repo:acme/*" in page and "user:alice" in page  # authority with its owner, met
    assert str(world.parent.id)[:13] in page and str(world.child.id)[:13] in page
    assert 'data-allowed="false"' in page and "<strong>credential_gateway</strong>" in page
    assert "no_grant_agent" in page


def test_the_task_page_shows_its_decisions_with_denials_marked(world, grants, as_person):
    page = as_person(world.people.bob).get(f"/tasks/{world.parent.id}/").content.decode()
    section = page[page.index('id="task-decisions"') : page.index('id="task-audit"')]
    assert section.count('data-allowed="false"') == 1 and section.count('data-allowed="true"') == 1
    assert "no_grant_agent" in section and "2026-12-01.1" in section and "r2" in section
    assert "tool.search on" in section  # what it may do now


def test_the_decisions_list_filters_in_the_url(world, grants, as_person):
    client = as_person(world.people.bob)

    def shown(query):
        return client.get(f"/decisions/?{query}").content.count(b"data-allowed=")

    assert shown("") == 2
    assert shown("outcome=denied&boundary=credential_gateway&principal=agent:t.steps") == 1
    assert b"model.chat" in client.get("/decisions/?outcome=denied").content
    assert shown("principal=user:bob") == 0 and shown("principal=user:alice") == 2
    assert shown(f"task={world.done.id}") == 0 and shown("boundary=worker") == 0
    assert client.get("/decisions/?outcome=maybe").status_code == 400


def test_the_grants_list_filters_by_principal_action_resource_and_state(world, grants, as_person):
    client = as_person(world.people.bob)

    def shown(query):
        return re.findall(rb'id="grant-(\d+)"', client.get(f"/grants/?{query}").content)

    assert len(shown("")) == 2
    assert shown("principal=agent:t.steps") == [str(grants["agent"].id).encode()]
    assert shown("resource=repo:acme/docs") == [str(g.id).encode() for g in (grants["owner"], grants["agent"])]
    assert shown("action=model.chat") == [] and shown("state=revoked") == []
    assert client.get("/grants/?state=gone").status_code == 400


def test_the_owner_page_shows_a_persons_grants_and_carol_finds_no_acme_owner(world, grants, as_person):
    page = as_person(world.people.bob).get("/owners/alice/").content.decode()
    assert f'id="grant-{grants["owner"].id}"' in page and f'id="grant-{grants["agent"].id}"' not in page
    assert as_person(world.people.carol).get("/owners/alice/").status_code == 404


def test_carol_sees_globex_grants_only_on_a_shared_agents_page(world, grants, as_person):
    mine = grant_create(tenant="globex", principal=AGENT, action="tool.search", resource="globex:*", actor="user:carol")
    page = as_person(world.people.carol).get("/agents/t.steps/").content.decode()
    assert f'id="grant-{mine.id}"' in page and f'id="grant-{grants["agent"].id}"' not in page
    assert str(world.parent.id) not in page and str(world.other.id) in page


def test_creating_a_grant_with_a_pattern_and_an_expiry(world, as_person):
    client = as_person(world.people.dave)
    response = client.post(
        "/grants/new/",
        {"principal": AGENT, "action": "tool.search", "resource": "repo:acme/*", "expires_at": "2099-01-01T09:30"},
    )
    assert response.status_code == 302
    grant = Grant.objects.get(principal=AGENT)
    assert (grant.resource, grant.expires_at.isoformat(), grant.granted_by) == (
        "repo:acme/*",
        "2099-01-01T09:30:00+00:00",
        "user:dave",
    )
    assert response["Location"] == f"/grants/{grant.id}/"


def test_an_unknown_agent_is_a_404_page(world, as_person):
    assert as_person(world.people.bob).get("/agents/no.such/").status_code == 404


def _check(response, status):
    assert response.status_code == status, (response.status_code, response.content[:300])
    return response


def test_the_right_over_an_agent_in_one_tenant_is_none_in_another(world):
    from console.access import Principal, may_change_grants
    from console.models import OPERATE, Membership

    _delegate(world)
    Membership.objects.create(user=world.people.alice, tenant_id="globex", role="operator")

    def alice_in(tenant):
        return Principal(
            user=world.people.alice, tenant=tenant, role="operator", channel="console", scope=OPERATE, credential="test"
        )

    assert may_change_grants(alice_in("acme"), AGENT)
    assert not may_change_grants(alice_in("globex"), AGENT)
    assert not may_change_grants(alice_in("acme"), "agent:research.batch")
    assert not may_change_grants(alice_in("acme"), "user:alice")
