"""Schemathesis against the served OpenAPI schema, in every `make test`: whatever each
route is sent (valid, and by negative generation invalid, values), it never answers a
5xx, and every 4xx carries the error shape {code, message, details}.

A bounded number of examples per route keeps the run under two minutes on a small
machine; hypothesis's example database is off, so no run replays an earlier run's
failures and every run has the same size.
"""

from __future__ import annotations

import random

import psycopg_pool.base
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from console.wsgi import application
from runtime.tasks.services import task_submit
from tests.api.conftest import make_token
from tests.api.world import ALICE, blocked_task_with_unknown_effect
from tests.people import make_people

EXAMPLES_PER_ROUTE = 25

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application)
# /health answers 503 while no worker runs, as here: that reports the fleet, not the input.
fuzzed = schema.exclude(path="/api/v1/health")


def error_shape(ctx, response, case):
    """Every 4xx is {code: str, message: str, details: object}."""
    if 400 <= response.status_code < 500:
        body = response.json()
        assert isinstance(body, dict) and set(body) == {"code", "message", "details"}, body
        assert isinstance(body["code"], str) and body["code"].isupper(), body
        assert isinstance(body["message"], str) and isinstance(body["details"], dict), body


@pytest.fixture(autouse=True)
def pool_jitter_of_its_own(monkeypatch):
    """psycopg_pool's worker threads draw a connection's expiry jitter from the `random`
    module; one that opens a connection while Hypothesis draws an example changes the
    module's state under it, which Hypothesis reports as a strategy using `random` (a
    flaky HypothesisDeprecationWarning). The pool keeps its jitter, from a generator of
    its own."""
    monkeypatch.setattr(psycopg_pool.base, "random", random.Random().random)


@pytest.fixture
def operator_token(transactional_db, settings):
    # Committed, not rolled back: the WSGI handler closes the request's connection when
    # it finishes (request_finished), as a real server does, which a test transaction
    # would not survive.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    people = make_people()
    task_submit(agent="t.steps", input={"n": 1}, **ALICE)  # something for lists and filters to find
    blocked_task_with_unknown_effect()
    return lambda: make_token(people.alice, name="fuzz")


@fuzzed.parametrize()
@settings(
    max_examples=EXAMPLES_PER_ROUTE,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
def test_no_route_answers_a_5xx_and_every_error_has_the_shape(case, operator_token):
    # A fresh token per example: an example may revoke the token it was sent with.
    response = case.call(headers={"Authorization": f"Bearer {operator_token()}"})
    assert response.status_code < 500, (case.method, case.formatted_path, response.status_code, response.text[:500])
    # Schemathesis's own checks too, for its report of how to reproduce a failure.
    case.validate_response(response, checks=[not_a_server_error, error_shape])
