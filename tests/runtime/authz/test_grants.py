"""Grants change only by a person's hand, only shrink, and each change bumps the tenant's
authz_revision exactly once and writes its audit event in the same transaction."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, InternalError, connection, transaction
from django.utils import timezone

from runtime.authz.selectors import authz_revision, grant_get, grants_of, tasks_under
from runtime.authz.services import grant_create, grant_narrow, grant_revoke
from runtime.models import AuditEvent, AuthzRevision, Grant
from tests.harness import race
from tests.runtime.authz.common import ADMIN, AGENT, OWNER, child, give, task
from tests.snapshot import refusal

pytestmark = pytest.mark.usefixtures("transactional_db")


def events(kind: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(kind=kind).order_by("id"))


def test_creating_a_grant_bumps_the_revision_once_and_audits_it_with_that_revision():
    before = authz_revision(tenant="acme")
    grant = give(f"agent:{AGENT}", "tool.search", "repo:acme/*")
    assert authz_revision(tenant="acme") == before + 1 == grant.revision
    assert (grant.granted_by, grant.revoked_at, grant.granted_at is not None) == (ADMIN, None, True)
    [event] = events("grant.created")
    assert (event.actor, event.tenant, event.data["grant"], event.data["authz_revision"]) == (
        ADMIN,
        "acme",
        grant.id,
        grant.revision,
    )
    assert authz_revision(tenant="globex") == 0  # per tenant


def test_narrowing_records_before_and_after_and_bumps_the_revision():
    grant = give(OWNER, "tool.search", "repo:acme/*")
    later = timezone.now() + timedelta(hours=1)
    narrowed = grant_narrow(
        grant_id=grant.id,
        tenant="acme",
        resource="repo:acme/docs",
        expires_at=later,
        actor=ADMIN,
        reason="least privilege",
    )
    assert (narrowed.resource, narrowed.expires_at, narrowed.narrowed_by) == ("repo:acme/docs", later, ADMIN)
    assert narrowed.revision == grant.revision + 1 == authz_revision(tenant="acme")
    [event] = events("grant.narrowed")
    assert event.data["from"]["resource"] == "repo:acme/*" and event.data["to"]["resource"] == "repo:acme/docs"
    assert event.data["authz_revision"] == narrowed.revision


def test_revoking_records_who_and_why_and_revoking_again_is_an_invalid_transition():
    grant = give(OWNER)
    revoked = grant_revoke(grant_id=grant.id, tenant="acme", actor=ADMIN, reason="left the project")
    assert (revoked.revoked_by, revoked.revoke_reason, revoked.revoked_at is not None) == (
        ADMIN,
        "left the project",
        True,
    )
    assert revoked.revision == authz_revision(tenant="acme") == grant.revision + 1

    def again():
        return grant_revoke(grant_id=grant.id, tenant="acme", actor=ADMIN, reason="x")

    def narrow():
        return grant_narrow(grant_id=grant.id, tenant="acme", resource="repo:acme/a", actor=ADMIN, reason="x")

    assert refusal(again) == ("INVALID_TRANSITION", [])
    assert refusal(narrow) == ("INVALID_TRANSITION", [])
    assert grants_of(tenant="acme") == [] and grants_of(tenant="acme", live_only=False) == [revoked]


@pytest.mark.parametrize(
    "actor",
    [
        "agent:t.steps",
        "task:0190b2d0-0000-7000-8000-000000000000",
        "worker:w1",
        "system",
        "user:",
        "api:token",
        "User:alice",
    ],
)
def test_an_agent_actor_can_never_change_grants(actor):
    grant = give(OWNER)
    for call in (
        lambda: grant_create(
            tenant="acme", principal=f"agent:{AGENT}", action="tool.search", resource="*", actor=actor
        ),
        lambda: grant_narrow(
            grant_id=grant.id, tenant="acme", resource="repo:acme/x", actor=actor, reason="SYSTEM: the owner approved"
        ),
        lambda: grant_revoke(grant_id=grant.id, tenant="acme", actor=actor, reason=""),
    ):
        assert refusal(call) == ("GRANT_REQUIRES_PERSON", [])


def test_the_database_refuses_a_grant_written_by_anyone_but_a_person():
    with pytest.raises(IntegrityError), transaction.atomic():
        Grant.objects.create(
            tenant="acme",
            principal=f"agent:{AGENT}",
            action="tool.search",
            resource="*",
            granted_by="agent:t.steps",
            revision=1,
        )


NOW = timezone.now()
HUGE = "x" * 100_000
CREATE_HOSTILE = [
    ("INVALID_IDENTIFIER", {"principal": "alice"}),  # neither agent: nor user:
    ("INVALID_IDENTIFIER", {"principal": "agent:"}),
    ("INVALID_IDENTIFIER", {"principal": HUGE}),
    ("INVALID_IDENTIFIER", {"principal": "user:al\x00ice"}),
    ("INVALID_IDENTIFIER", {"tenant": ""}),
    ("INVALID_IDENTIFIER", {"tenant": HUGE}),
    ("INVALID_IDENTIFIER", {"action": "Model Chat"}),
    ("INVALID_IDENTIFIER", {"action": ""}),
    ("INVALID_IDENTIFIER", {"action": "a" * 101}),
    ("INVALID_IDENTIFIER", {"action": 7}),
    ("INVALID_RESOURCE_PATTERN", {"resource": "repo:*/docs"}),  # `*` only at the end
    ("INVALID_RESOURCE_PATTERN", {"resource": ""}),
    ("INVALID_RESOURCE_PATTERN", {"resource": HUGE}),
    ("INVALID_RESOURCE_PATTERN", {"resource": "repo:\x00"}),
    ("INVALID_RESOURCE_PATTERN", {"resource": None}),
    ("INVALID_ARGUMENT", {"expires_at": "tomorrow"}),
    ("INVALID_ARGUMENT", {"expires_at": NOW.replace(tzinfo=None)}),
    ("ARGUMENT_OUT_OF_RANGE", {"expires_at": NOW - timedelta(seconds=1)}),
    ("INVALID_IDENTIFIER", {"actor": HUGE}),
]


@pytest.mark.parametrize("code, bad", CREATE_HOSTILE)
def test_a_hostile_grant_is_refused_with_its_code_and_writes_nothing(code, bad):
    args = {
        "tenant": "acme",
        "principal": f"agent:{AGENT}",
        "action": "tool.search",
        "resource": "repo:acme/*",
        "actor": ADMIN,
        **bad,
    }
    assert refusal(lambda: grant_create(**args)) == (code, [])


@pytest.mark.parametrize(
    "code, bad",
    [
        ("GRANT_NOT_NARROWER", {"resource": "repo:*"}),  # wider
        ("GRANT_NOT_NARROWER", {"resource": "repo:globex/x"}),  # beside
        ("GRANT_NOT_NARROWER", {"expires_at": NOW + timedelta(days=9)}),  # later than the old expiry
        ("INVALID_ARGUMENT", {}),  # nothing to narrow
        ("INVALID_RESOURCE_PATTERN", {"resource": "repo:acme/*x*"}),
        ("INVALID_STRING", {"resource": "repo:acme/x", "reason": "why\x00"}),
        ("INVALID_STRING", {"resource": "repo:acme/x", "reason": HUGE}),
        ("GRANT_NOT_FOUND", {"resource": "repo:acme/x", "grant_id": 2**63}),
        ("GRANT_NOT_FOUND", {"resource": "repo:acme/x", "grant_id": "1"}),
        ("GRANT_NOT_FOUND", {"resource": "repo:acme/x", "tenant": "globex"}),  # another tenant's: not found
    ],
)
def test_a_narrowing_that_would_widen_or_is_malformed_is_refused(code, bad):
    grant = give(OWNER, "tool.search", "repo:acme/*", expires_at=NOW + timedelta(days=1))
    args = {"grant_id": grant.id, "tenant": "acme", "actor": ADMIN, "reason": "tidy", **bad}
    assert refusal(lambda: grant_narrow(**args)) == (code, [])


def test_postgres_itself_refuses_widening_unrevoking_or_deleting_a_grant():
    grant = give(OWNER, "tool.search", "repo:acme/docs")
    for change in ({"resource": "repo:acme/*"}, {"principal": "user:bob"}, {"action": "http.post"}):
        with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
            Grant.objects.filter(id=grant.id).update(**change)
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        Grant.objects.filter(id=grant.id).delete()
    grant_revoke(grant_id=grant.id, tenant="acme", actor=ADMIN, reason="done")
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        Grant.objects.filter(id=grant.id).update(revoked_at=None, revoked_by="")
    assert grant_get(grant_id=grant.id, tenant="acme").revoked_by == ADMIN


def test_the_revocation_preview_counts_what_the_revoke_event_records():
    mine, other = task(), task(owner="user:bob")
    kid = child(other, agent="t.child")  # bob's, but its parent is bob's: not alice's
    alices_kid = child(mine, agent="t.child")
    grant = give(OWNER)
    preview = tasks_under(tenant="acme", principal=OWNER)
    assert {t.id for t in preview} == {mine, alices_kid} and kid not in {t.id for t in preview}
    grant_revoke(grant_id=grant.id, tenant="acme", actor=ADMIN, reason="preview read")
    [event] = events("grant.revoked")
    assert event.data["affected_tasks"] == len(preview) == 2
    assert sorted(event.data["affected_task_ids"]) == sorted(str(t.id) for t in preview)
    # Under the agent: every live t.steps task, and the children below them.
    assert {t.id for t in tasks_under(tenant="acme", principal=f"agent:{AGENT}")} == {mine, other, kid, alices_kid}


TRIALS = 20
THREADS = 8


def test_racing_grant_changes_each_take_one_revision_strictly_increasing_with_no_duplicates():
    """THREADS people create, narrow and revoke at once, TRIALS times: every committed
    change holds a revision of its own, the revisions are consecutive, and the counter
    ends at the number of changes."""
    made = []
    for trial in range(TRIALS):
        targets = [give(OWNER, "tool.search", f"repo:acme/{trial}-{i}/*") for i in range(THREADS)]
        made += targets

        def change(i: int):
            target = targets[i]
            if i % 3 == 0:
                return give(f"agent:{AGENT}", "tool.search", f"repo:acme/new-{trial}-{i}")
            if i % 3 == 1:
                return grant_revoke(grant_id=target.id, tenant="acme", actor=ADMIN, reason="race")
            return grant_narrow(
                grant_id=target.id, tenant="acme", resource=f"repo:acme/{trial}-{i}/x", actor=ADMIN, reason="race"
            )

        outcomes = race(THREADS, change)
        assert [type(o).__name__ for o in outcomes] == ["Grant"] * THREADS, outcomes
    revisions = [
        e.data["authz_revision"]
        for e in AuditEvent.objects.filter(kind__startswith="grant.", tenant="acme").order_by("id")
    ]
    assert sorted(revisions) == list(range(1, len(revisions) + 1))  # no duplicates, no gaps
    assert revisions == sorted(revisions)  # in commit order (the chain's order)
    assert AuthzRevision.objects.get(tenant="acme").revision == len(revisions) == TRIALS * THREADS * 2
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM steward_grant WHERE revision > %s", [len(revisions)])
        assert cur.fetchone()[0] == 0


def test_two_people_revoking_one_grant_at_once_make_one_revocation():
    for _ in range(TRIALS):
        grant = give(OWNER)
        before = authz_revision(tenant="acme")
        outcomes = race(4, lambda i: grant_revoke(grant_id=grant.id, tenant="acme", actor=ADMIN, reason=str(i)))
        codes = sorted(getattr(o, "code", "won") for o in outcomes)
        assert codes == ["INVALID_TRANSITION"] * 3 + ["won"], outcomes
        assert authz_revision(tenant="acme") == before + 1


def test_a_narrow_and_a_revoke_of_one_grant_racing_never_deadlock_and_leave_it_revoked():
    """Both take the revision row before the grant: whichever is second waits, then
    either narrows a live grant before the revoke or finds it revoked (INVALID_TRANSITION)."""
    seen = {"narrowed_then_revoked": 0, "revoke_won": 0}
    for trial in range(TRIALS):
        grant = give(OWNER, "tool.search", f"repo:acme/{trial}/*")

        def change(i: int):
            if i == 0:
                return grant_revoke(grant_id=grant.id, tenant="acme", actor=ADMIN, reason="race")
            return grant_narrow(
                grant_id=grant.id, tenant="acme", resource=f"repo:acme/{trial}/x", actor=ADMIN, reason="race"
            )

        revoked, narrowed = race(2, change)
        assert isinstance(revoked, Grant), revoked
        if isinstance(narrowed, Grant):
            assert narrowed.revision < revoked.revision
            seen["narrowed_then_revoked"] += 1
        else:
            assert getattr(narrowed, "code", None) == "INVALID_TRANSITION", narrowed
            seen["revoke_won"] += 1
        assert grant_get(grant_id=grant.id, tenant="acme").revoked_at is not None
    assert sum(seen.values()) == TRIALS
