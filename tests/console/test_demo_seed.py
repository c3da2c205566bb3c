"""The demo's seed (console/dev/demo/seed.py) runs on every `make run`: seeding again
must never undo what a person did since, and what it makes is audited as the seed.

Issue 20: seeding matched grants by (principal, action, resource), so after alice
narrowed research.batch's `tool.search` from `repo:acme/*` to `repo:acme/public/*` the
next start gave `repo:acme/*` again beside it, audited as `grant.created` by user:dave.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from console.access import agent_stewards, member_remove, person_principal
from console.dev.demo.seed import GRANTS, POOLS, STEWARDS, TASKS, seed_demo
from runtime.authz.services import SEED, grant_narrow, grant_revoke, grant_seed
from runtime.models import AuditEvent, Grant
from tests.harness import race
from tests.tamper import bypassing_the_triggers

RESEARCH_SEARCH = {"tenant": "acme", "principal": "agent:research.batch", "action": "tool.search"}
PEOPLE = ("user:alice", "user:bob", "user:carol", "user:dave")


@pytest.fixture
def seeded(db, settings):
    settings.DEBUG = True
    seed_demo()
    return {(g.tenant, g.principal, g.action, g.resource): g for g in Grant.objects.all()}


def grants() -> list[tuple]:
    return sorted(
        Grant.objects.values_list("tenant", "principal", "action", "resource", "revoked_at", "granted_by", "revision")
    )


def dave(tenant: str = "acme"):
    return person_principal(get_user_model().objects.get(username="dave"), tenant, channel="console", credential="t")


def test_seeding_gives_each_grant_once_and_audits_everything_it_made_as_the_seed(seeded):
    assert set(seeded) == set(GRANTS)
    assert {g.granted_by for g in seeded.values()} == {SEED}
    made = AuditEvent.objects.filter(actor=SEED)
    assert made.filter(kind="grant.created").count() == len(GRANTS)
    assert made.filter(kind="task.submitted").count() == len(TASKS)
    assert made.filter(kind="pool.created").count() == len(POOLS)
    assert made.filter(kind="agent.steward_added").count() == len(STEWARDS)
    assert made.filter(kind="member.added").count() == 4
    # Nothing the seed did is in a person's name.
    assert not AuditEvent.objects.filter(actor__in=PEOPLE).exists()

    before = grants()
    again = seed_demo()
    assert grants() == before
    assert f"grants: 0 given, {len(GRANTS)} kept as they are; alice may change research.batch's grants in acme" in again


def test_a_grant_a_person_narrowed_is_neither_given_again_nor_widened(seeded):
    wide = seeded[("acme", "agent:research.batch", "tool.search", "repo:acme/*")]
    grant_narrow(grant_id=wide.id, tenant="acme", resource="repo:acme/public/*", actor="user:alice", reason="public")
    before = grants()

    seed_demo()
    seed_demo()

    assert grants() == before
    (only,) = Grant.objects.filter(**RESEARCH_SEARCH)
    assert (only.id, only.resource, only.narrowed_by) == (wide.id, "repo:acme/public/*", "user:alice")


@pytest.mark.parametrize("how", ["revoked", "removed"])
def test_a_grant_a_person_revoked_or_removed_is_not_given_again(seeded, how):
    grant = seeded[("acme", "user:alice", "tool.search", "repo:*")]
    if how == "revoked":
        grant_revoke(grant_id=grant.id, tenant="acme", actor="user:dave", reason="no")
    else:  # gone from the table altogether (by hand, past the triggers): the trail remembers
        bypassing_the_triggers("DELETE FROM steward_grant WHERE id = %s", [grant.id])
    before = grants()

    seed_demo()

    assert grants() == before
    assert not Grant.objects.filter(tenant="acme", principal="user:alice", action="tool.search", revoked_at=None)


def test_a_grant_seeded_in_a_persons_name_before_this_change_and_narrowed_since_is_kept(db):
    """A database seeded by the old seed: its grant says user:dave gave it, and nothing in
    the trail says the seed did. The narrowed grant is still found, and not widened."""
    from runtime.authz.services import grant_create

    old = grant_create(actor="user:dave", resource="repo:acme/*", **RESEARCH_SEARCH)
    grant_narrow(grant_id=old.id, tenant="acme", resource="repo:acme/public/*", actor="user:alice", reason="public")

    assert grant_seed(resource="repo:acme/*", **RESEARCH_SEARCH) is None
    assert grant_seed(resource="repo:acme/public/docs/*", **RESEARCH_SEARCH) is None  # within it: still overlaps
    assert list(Grant.objects.filter(**RESEARCH_SEARCH).values_list("resource", flat=True)) == ["repo:acme/public/*"]
    assert grant_seed(resource="repo:other/*", **RESEARCH_SEARCH) is not None  # disjoint: nothing to widen


def test_a_kept_grant_leaves_the_authz_revision_where_it_was(db):
    from runtime.authz.selectors import authz_revision

    assert grant_seed(resource="repo:acme/*", **RESEARCH_SEARCH) is not None
    revision = authz_revision(tenant="acme")
    assert grant_seed(resource="repo:acme/*", **RESEARCH_SEARCH) is None
    assert authz_revision(tenant="acme") == revision


def test_seeds_racing_give_one_grant(live):
    for trial in range(10):
        resource = f"repo:race-{trial}/*"
        results = race(4, lambda i: grant_seed(resource=resource, **RESEARCH_SEARCH))
        assert not [r for r in results if isinstance(r, Exception)], results
        assert sum(r is not None for r in results) == 1
        assert Grant.objects.filter(resource=resource).count() == 1


def test_a_member_or_steward_right_an_admin_removed_is_not_given_again(seeded):
    assert agent_stewards(dave(), "research.batch") == ["alice"]
    from console.access import agent_steward_set

    agent_steward_set(principal=dave(), name="research.batch", username="alice", allowed=False, reason="enough")
    member_remove(principal=dave(), username="bob", reason="left")

    seed_demo()

    assert agent_stewards(dave(), "research.batch") == []
    assert not get_user_model().objects.get(username="bob").memberships.exists()
    assert AuditEvent.objects.filter(kind="member.added", data__person="bob").count() == 1  # the first seed's
