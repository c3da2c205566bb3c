"""A revoke racing the executor's authority check (runtime/worker/authority.py check,
what ctx.effect(..., requires=...) and ctx.authorize call), released together by a
barrier, over many trials. Whichever wins, the outcome is consistent: an allow saw the
revision before the revoke (its snapshot did not contain it), a deny saw the revoke,
and once the revoke has committed no allow is ever recorded."""

from __future__ import annotations

import time
from collections import Counter
from types import SimpleNamespace

import pytest

from runtime.authz.services import grant_revoke
from runtime.errors import AuthorityDenied
from runtime.models import Decision, Grant
from tests.agents import WRITE
from tests.harness import race
from tests.runtime.authz.common import ADMIN, OWNER, give, task

pytestmark = pytest.mark.usefixtures("transactional_db")

TRIALS = 60


def test_a_revoke_racing_the_executor_check_never_lets_an_allow_follow_it():
    from runtime.worker import authority

    outcomes = Counter()
    for trial in range(TRIALS):
        t = task(agent="t.requires")
        give("agent:t.requires", *WRITE)
        owner_grant = give(OWNER, *WRITE)
        ctx = SimpleNamespace(task_id=t, epoch=1)

        def act(i, ctx=ctx, owner_grant=owner_grant):
            if i == 0:
                return grant_revoke(grant_id=owner_grant.id, tenant="acme", actor=ADMIN, reason=f"trial {trial}")
            # Spread the check across the revoke's transaction (bump, update, count, commit),
            # so that both orders happen.
            time.sleep((trial % 12) * 0.001)
            try:
                return authority.check(ctx, *WRITE)
            except AuthorityDenied as denied:
                return denied

        revoked, checked = race(2, act)
        assert isinstance(revoked, Grant), revoked
        [decision] = Decision.objects.filter(task_id=t)
        if decision.allowed:
            outcomes["allowed before the revoke"] += 1
            # Its one snapshot did not contain the revoke: the revision it recorded precedes it.
            assert decision.authz_revision < revoked.revision
            assert not isinstance(checked, AuthorityDenied)
        else:
            outcomes["denied after the revoke"] += 1
            assert decision.authz_revision >= revoked.revision
            assert (decision.reason_code, decision.boundary) == ("no_grant_owner", "worker")
            assert isinstance(checked, AuthorityDenied) and checked.decision_id == str(decision.id)
        # After the revoke has committed, every check is a denial.
        with pytest.raises(AuthorityDenied):
            authority.check(ctx, *WRITE)
        late = Decision.objects.filter(task_id=t).order_by("id").last()
        assert not late.allowed and late.authz_revision >= revoked.revision

    assert sum(outcomes.values()) == TRIALS
    assert outcomes["allowed before the revoke"] and outcomes["denied after the revoke"], outcomes
    print(f"\nrevoke vs executor check over {TRIALS} trials: {dict(outcomes)}")
