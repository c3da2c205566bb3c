"""A revocation racing gateway calls, over many barrier trials: no call is admitted on a
snapshot that includes the revocation, and no call sent after the revocation committed
is admitted. The outcomes are counted, both kinds must occur, and the model server saw
exactly the admitted calls."""

from __future__ import annotations

import time

import pytest

from runtime.authz.services import grant_revoke
from runtime.models import Decision
from tests.console.gateway.conftest import completion_body, model_token, model_url, post
from tests.harness import race
from tests.runtime.authz.common import ADMIN, give_both, running_task

pytestmark = [pytest.mark.integration]

TRIALS = 60


def test_no_gateway_call_is_admitted_after_the_revocation_commits(live, gateway_web, model):
    counts = {"admitted before": 0, "denied after": 0}
    for trial in range(TRIALS):
        t = running_task()
        agent_grant, _ = give_both("model.call", "model:fake-1")
        token = model_token(t)
        marks = {}

        def act(i, t=t, agent_grant=agent_grant, token=token, marks=marks):
            if i == 0:
                revoked = grant_revoke(grant_id=agent_grant.id, tenant="acme", actor=ADMIN, reason=f"race {trial}")
                marks["committed"] = time.monotonic()
                return revoked.revision
            # Spread the calls over the revocation's commit (0-27 ms after the barrier):
            # some land before it, some after, whatever this machine's commit costs.
            time.sleep((trial % 10) * 0.003)
            marks["sent"] = time.monotonic()
            return post(model_url(gateway_web), token=token, body=completion_body(), key=f"race-{trial}")

        revision, (status, answer, headers) = race(2, act)
        decision_id = headers.get("Steward-Decision") or answer["details"]["decision_id"]
        decision = Decision.objects.get(id=decision_id)
        assert status in (200, 403), answer
        assert decision.allowed == (status == 200)
        if decision.allowed:
            # Decided on a snapshot from before the revocation's commit.
            assert decision.authz_revision < revision
            counts["admitted before"] += 1
        else:
            assert decision.authz_revision >= revision
            assert (answer["details"]["boundary"], answer["details"]["reason_code"]) == (
                "credential_gateway",
                "no_grant_agent",
            )
            counts["denied after"] += 1
        if marks["sent"] > marks["committed"]:
            assert status == 403, f"trial {trial}: a call sent after the revocation committed was admitted"
    assert sum(counts.values()) == TRIALS
    assert len(model.recorded()) == counts["admitted before"]
    print(f"revocation race over {TRIALS} trials: {counts}")
    assert counts["denied after"] > 0
