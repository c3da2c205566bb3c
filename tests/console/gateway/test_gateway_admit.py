"""The admission is one statement committed on its own (runtime/sql/gateway_admit.sql):
the decision and the call's row are committed together before anything is forwarded,
a denial commits durably, and the commit mode it chooses ends with its own transaction
(the pooled connection's next statement is durable again)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from runtime import db
from runtime.authz.services import grant_revoke
from runtime.authz.tokens import token_decision_params, token_verify
from runtime.gateway.services import MODEL_ACTION, MODEL_ROUTE, gateway_admit, model_resource
from tests.console.gateway.conftest import model_token
from tests.runtime.authz.common import ADMIN, give_both, running_task

pytestmark = [pytest.mark.integration]


def admit(t, key: str):
    claims = token_verify(model_token(t), audience=MODEL_ROUTE)
    return gateway_admit(
        claims=claims,
        route=MODEL_ROUTE,
        action=MODEL_ACTION,
        resource=model_resource("fake-1"),
        idempotency_key=key,
        step_seq=0,
    )


def seen_elsewhere(call_id):
    """The call's outcome and its decision's verdict, read on a connection of its own:
    what another process sees once the admission returned."""
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        dbname=settings["NAME"],
        user=settings["USER"],
        password=settings["PASSWORD"] or None,
        autocommit=True,
    ) as other:
        return other.execute(
            "SELECT c.outcome, d.allowed FROM steward_gateway_call c "
            "JOIN steward_decision d ON d.id = c.decision_id WHERE c.id = %s",
            (call_id,),
        ).fetchone()


def synchronous_commit() -> str:
    return db.cursor().execute("SHOW synchronous_commit").fetchone()[0]


def test_an_admission_commits_its_decision_and_call_together_and_leaves_commits_durable(live):
    t = running_task()
    grant, _ = give_both("model.call", "model:*")
    admitted = admit(t, "k-1")
    assert admitted.outcome == "admitted" and admitted.decision.allowed
    assert seen_elsewhere(admitted.call_id) == ("admitted", True)
    assert synchronous_commit() == "on"  # the admission's `off` ended with its own commit

    grant_revoke(grant_id=grant.id, tenant="acme", actor=ADMIN, reason="gone")
    denied = admit(t, "k-2")
    assert denied.outcome == "denied" and not denied.decision.allowed
    assert denied.decision.reason_code == "no_grant_agent"
    assert seen_elsewhere(denied.call_id) == ("denied", False)
    assert synchronous_commit() == "on"


def test_the_admission_statement_chooses_an_async_commit_only_for_an_allowed_call(live):
    t = running_task()
    give_both("model.call", "model:fake-1")
    claims = token_verify(model_token(t), audience=MODEL_ROUTE)

    def mode(resource: str, durable: bool) -> str:
        params = token_decision_params(claims=claims, action=MODEL_ACTION, resource=resource)
        params.update(
            step=0, jti=claims["jti"], route=MODEL_ROUTE, key=f"k-{resource}-{durable}", durable=durable, in_flight=60.0
        )
        return db.fetchone("gateway_admit", params)[-1]

    assert mode("model:fake-1", durable=False) == "off"
    assert mode("model:fake-1", durable=True) == "on"  # STEWARD_GATEWAY_DURABLE_ADMIT=1
    assert mode("model:fake-2", durable=False) == "on"  # a denial: an audit event, always durable
    assert synchronous_commit() == "on"
