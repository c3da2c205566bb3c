"""Schemathesis against the served OpenAPI schema, with every check it has: each route is
sent valid and invalid requests (its explicit examples, the coverage phase's boundary
values and hostile shapes, and STEWARD_FUZZ_EXAMPLES generated cases) over HTTP, to a
real server (pytest-django's live server: Django's threaded server on the test
database), and each answer is held to the schema:

* never a 5xx; a status, a body and headers the route declares, each refusal's `code`
  among the codes declared for its status (console/api/openapi.py);
* an invalid request (a wrong type, a malformed time or id, a body that is no object)
  refused with a 4xx;
* a valid request accepted, or refused only for what the schema cannot say (a cursor
  this list never gave, an agent not registered, a time already past): a refusal the
  route declares among the runtime's (runtime/errors.py), never the schema layer's own
  INVALID_REQUEST. Schemathesis's positive-data check is told, route by route, the
  statuses of those runtime refusals; `the_schema_layer_never_refuses_valid_data`
  below keeps them apart from INVALID_REQUEST, which shares 422;
* every 4xx in the error shape {code, message, details}; methods a path lacks are 405
  with `Allow`; every route but /health refuses a request without its token.

Over HTTP, not through the WSGI application in-process: schemathesis compares what it
meant to send with the URL it sent, and its WSGI transport encodes some generated
values (a list of objects for a text parameter) otherwise than the URL it records.

`make test` runs it at 25 examples a route; `make fuzz` at FUZZ_EXAMPLES (100). Each run
draws the same cases (a fixed seed, and hypothesis's example database off), so a
failure reproduces; FUZZ_SEED draws others. Marked `process`: it serves HTTP on a port,
and it was 44 % of the check tier's time (its tests took 347 s with it and 194 s without,
2026-12-03, one machine, one sitting), which the inner loop cannot afford; `make test`
and CI run it.
"""

from __future__ import annotations

import json
import os
import random

import psycopg_pool.base
import pytest
import schemathesis
from django.core.serializers.json import DjangoJSONEncoder
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import is_unexpected_http_status_case

from console.api.api import api
from console.api.errors import HTTP_STATUS
from runtime.tasks.services import task_submit
from tests.api.conftest import make_token
from tests.api.world import ALICE, blocked_task_with_unknown_effect
from tests.people import make_people

# django_db: the database its fixtures read is set up even when only these tests run (pytest-django
# sets up only the databases some collected test marks).
# process: a server on a port, and the check tier's largest cost: see above.
pytestmark = [pytest.mark.process, pytest.mark.django_db]

EXAMPLES = int(os.environ.get("STEWARD_FUZZ_EXAMPLES", "25"))
SEED = int(os.environ.get("STEWARD_FUZZ_SEED", "17"))
# Schemathesis's own list of what a valid request may be refused with (its default).
ACCEPTING = ["2xx", "3xx", "401", "403", "404", "409", "429"]
SCHEMA_LAYER = frozenset(HTTP_STATUS)  # INVALID_REQUEST, MALFORMED_JSON, ...: console/api/errors.py


def runtime_refusals(operation: dict) -> set[int]:
    """The statuses of the runtime refusals an operation declares (not the HTTP layer's)."""
    statuses = set()
    for status, answer in operation["responses"].items():
        schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
        codes = set(schema.get("properties", {}).get("code", {}).get("enum", ()))
        if codes - SCHEMA_LAYER - {"AUTH_REQUIRED"}:
            statuses.add(int(status))
    return statuses


# The document /api/v1/openapi.json serves, as JSON.
DOCUMENT = json.loads(json.dumps(api.get_openapi_schema(), cls=DjangoJSONEncoder))


def config() -> SchemathesisConfig:
    operations = [
        {
            "include-operation-id": operation["operationId"],
            "checks": {
                "positive_data_acceptance": {
                    "expected-statuses": ACCEPTING + sorted(str(s) for s in runtime_refusals(operation)),
                }
            },
        }
        for item in DOCUMENT["paths"].values()
        for operation in item.values()
    ]
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            # The token is the fixture's, fresh for each example: no Authorization of schemathesis's own.
            "generation": {"database": "none", "with-security-parameters": False},
            "operations": operations,
        }
    )


schema = schemathesis.openapi.from_dict(DOCUMENT, config=config())
# /health answers 503 while no worker runs, as here: that reports the fleet, not the input.
fuzzed = schema.exclude(path="/api/v1/health")


def error_shape(ctx, response, case):
    """Every 4xx is {code: str, message: str, details: object}."""
    if 400 <= response.status_code < 500:
        body = response.json()
        assert isinstance(body, dict) and set(body) == {"code", "message", "details"}, body
        assert isinstance(body["code"], str) and body["code"].isupper(), body
        assert isinstance(body["message"], str) and isinstance(body["details"], dict), body


def the_schema_layer_never_refuses_valid_data(ctx, response, case):
    """A request the schema calls valid is never refused by the schema layer: a 422
    INVALID_REQUEST (or a 400 BAD_REQUEST, 415...) for it means the schema and the parser
    disagree, whatever runtime refusals share its status."""
    if case.meta is None or not case.meta.generation.mode.is_positive or is_unexpected_http_status_case(case):
        return
    if 400 <= response.status_code < 500:
        code = response.json().get("code")
        assert code not in SCHEMA_LAYER, f"a valid request was refused {response.status_code} {code}: {response.text}"


@pytest.fixture(autouse=True)
def pool_jitter_of_its_own(monkeypatch):
    """psycopg_pool's worker threads draw a connection's expiry jitter from the `random`
    module; one that opens a connection while Hypothesis draws an example changes the
    module's state under it, which Hypothesis reports as a strategy using `random` (a
    flaky HypothesisDeprecationWarning). The pool keeps its jitter, from a generator of
    its own."""
    monkeypatch.setattr(psycopg_pool.base, "random", random.Random().random)


def test_the_fuzz_has_a_test_database(db):
    """The one test here that asks pytest-django for the database: with it in the
    session, pytest-django makes the test database that the module's server uses."""
    from django.db import connection

    assert connection.settings_dict["NAME"] == connection.creation._get_test_db_name()


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    """One live server and one committed world for the module, emptied at its end.

    A test per route, each with its own transactional database, spent more time emptying
    the database (a TRUNCATE of every table, 10-15 s on a loaded machine) than fuzzing:
    the routes share the world instead. A route's examples may change it (revoke the
    token, demote its owner, stop a task), so each example checks its token first."""
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import override_settings
    from pytest_django.live_server_helper import LiveServer

    # pytest-django makes the test database only for a session with a test that asks for
    # one; without it this fixture would write to, and flush, DATABASE_URL's own database.
    if connection.settings_dict["NAME"] != connection.creation._get_test_db_name():
        pytest.fail("the fuzz runs on the test database only: run it with test_the_fuzz_has_a_test_database")
    with django_db_blocker.unblock(), override_settings(PASSWORD_HASHERS=[FAST_HASHER]):
        people = make_people()
        task_submit(agent="t.steps", input={"n": 1}, **ALICE)  # something for lists and filters to find
        blocked_task_with_unknown_effect()
        live = LiveServer("localhost")
        live._live_server_modified_settings.enable()
        try:
            yield Server(live.url, people.dave)
        finally:
            live._live_server_modified_settings.disable()
            live.stop()
            call_command("flush", interactive=False, verbosity=0)


FAST_HASHER = "django.contrib.auth.hashers.MD5PasswordHasher"


class Server:
    """The live server's URL, and an admin's operate token that still works: an admin's
    reaches every route's success too (members, other people's tokens), not only its
    refusals. An example may revoke it, or take its owner's role: then a new one."""

    def __init__(self, url: str, admin):
        self.url, self.admin, self.secret = url, admin, None

    def token(self) -> str:
        from console.models import ADMIN, ApiToken, Membership

        usable = self.secret and ApiToken.objects.filter(prefix=self.secret[:12], revoked_at__isnull=True).exists()
        if not Membership.objects.filter(user=self.admin, tenant_id="acme", role=ADMIN).exists():
            Membership.objects.update_or_create(user=self.admin, tenant_id="acme", defaults={"role": ADMIN})
        if not usable:
            self.secret = make_token(self.admin, name="fuzz")
        return self.secret


@fuzzed.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
def test_every_route_answers_as_its_schema_declares(case, server):
    # call_and_validate raises on any failed check (every one schemathesis has, and ours).
    answer = case.call_and_validate(
        base_url=server.url,
        headers={"Authorization": f"Bearer {server.token()}"},
        additional_checks=[error_shape, the_schema_layer_never_refuses_valid_data],
    )
    assert answer.status_code < 500, answer.text[:300]
