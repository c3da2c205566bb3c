"""/metrics: the Prometheus text format, read from PostgreSQL at scrape time; open only to
STEWARD_METRICS_TOKEN or an allowed address, never naming a tenant to anyone else, whatever
they forge (a hostile table). JSON log lines."""

from __future__ import annotations

import base64
import json
import logging
from ipaddress import ip_network

import pytest
from prometheus_client.parser import text_string_to_metric_families

from console.logs import JsonFormatter
from runtime.fleet.services import process_beat, process_name
from runtime.meter import WAIT_BOUNDS
from runtime.tasks.services import task_submit
from tests.api.world import ALICE, blocked_task_with_unknown_effect


def scrape(client, address: str = "127.0.0.1", **headers) -> dict:
    response = client.get("/metrics", headers=headers, REMOTE_ADDR=address)
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_read_tasks_effects_pools_and_each_processes_counters_from_the_database(client, db):
    # The test client's address is 127.0.0.1: loopback may scrape without the token.
    for _ in range(2):
        task_submit(agent="t.steps", input={}, **ALICE)
    blocked_task_with_unknown_effect()
    waits = [0] * len(WAIT_BOUNDS)
    waits[0], waits[3] = 4, 1
    process_beat(
        kind="worker",
        totals={
            "steps": 12,
            "effects_committed": 3,
            "completed": 5,
            "failed": 1,
            "claims": 5,
            "waits": waits,
            "wait_seconds_sum": 0.07,
        },
        fresh={},
        waits=[0] * len(WAIT_BOUNDS),
    )
    process_beat(
        kind="supervisor", totals={"recovered": 2, "sweeps": 40}, fresh={}, waits=[0] * len(WAIT_BOUNDS), swept=True
    )

    m = scrape(client)
    assert m[("steward_tasks", (("status", "queued"), ("tenant", "acme")))] == 2
    assert m[("steward_tasks", (("status", "blocked"), ("tenant", "acme")))] == 1
    assert m[("steward_effects_unknown", (("tenant", "acme"),))] == 1
    assert m[("steward_pool_queued", (("pool", "default"),))] == 2
    assert m[("steward_pool_max_running", (("pool", "default"),))] == 50

    def of(name, kind, **more):
        # This process's own rows: in `make test` the shared fleet's workers beat into the
        # same database (committed, so this test's snapshot sees them too).
        more["process"] = process_name(kind)
        (value,) = [
            v
            for (n, labels), v in m.items()
            if n == name and dict(labels).get("kind") == kind and all(dict(labels).get(k) == x for k, x in more.items())
        ]
        return value

    assert of("steward_steps_total", "worker") == 12
    assert of("steward_effects_committed_total", "worker") == 3
    assert of("steward_tasks_finished_total", "worker", outcome="completed") == 5
    assert of("steward_lease_recoveries_total", "supervisor") == 2
    assert of("steward_dispatch_wait_seconds_bucket", "worker", le="0.005") == 4
    assert of("steward_dispatch_wait_seconds_bucket", "worker", le="0.05") == 5
    assert of("steward_dispatch_wait_seconds_bucket", "worker", le="+Inf") == 5
    assert of("steward_dispatch_wait_seconds_count", "worker") == 5
    assert m[("steward_processes_live", (("kind", "worker"),))] >= 1  # this one, and any fleet's
    assert ("steward_last_sweep_timestamp_seconds", ()) in m


TOKEN = "m3trics-token-for-prometheus"
OUTSIDER, PROXY, PROMETHEUS = "203.0.113.9", "10.0.0.2", "192.0.2.7"


def _basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


# (who asks, from REMOTE_ADDR, with these headers, at this path): each refused.
REFUSED = [
    ("an outsider", OUTSIDER, {}, ""),
    ("an outsider forging X-Forwarded-For", OUTSIDER, {"X-Forwarded-For": "127.0.0.1"}, ""),
    ("an outsider forging X-Real-IP", OUTSIDER, {"X-Real-IP": "127.0.0.1"}, ""),
    ("an outsider forging Forwarded", OUTSIDER, {"Forwarded": "for=127.0.0.1"}, ""),
    ("an outsider forging an allowed address", OUTSIDER, {"X-Forwarded-For": PROMETHEUS}, ""),
    ("a wrong token", OUTSIDER, {"Authorization": "Bearer wrong"}, ""),
    ("the token's prefix", OUTSIDER, {"Authorization": f"Bearer {TOKEN[:-1]}"}, ""),
    ("the token and more", OUTSIDER, {"Authorization": f"Bearer {TOKEN}x"}, ""),
    ("the token with a space before it", OUTSIDER, {"Authorization": f"Bearer  {TOKEN}"}, ""),
    ("an empty bearer", OUTSIDER, {"Authorization": "Bearer "}, ""),
    ("the token alone, no scheme", OUTSIDER, {"Authorization": TOKEN}, ""),
    ("the token as Basic credentials", OUTSIDER, {"Authorization": _basic(f"prometheus:{TOKEN}")}, ""),
    ("the token in another header", OUTSIDER, {"X-Metrics-Token": TOKEN}, ""),
    ("the token in the query string", OUTSIDER, {}, f"?token={TOKEN}"),
    ("the token as access_token", OUTSIDER, {}, f"?access_token={TOKEN}"),
    ("the token with non-ASCII after it", OUTSIDER, {"Authorization": f"Bearer {TOKEN}\u00e9"}, ""),
    ("an outsider relayed by an unknown proxy on this host", "127.0.0.1", {"X-Forwarded-For": OUTSIDER}, ""),
    ("loopback relayed by an unknown proxy", "127.0.0.1", {"X-Forwarded-For": "127.0.0.1"}, ""),
    ("a trusted proxy that names no client", PROXY, {}, ""),
    ("a trusted proxy relaying an outsider", PROXY, {"X-Forwarded-For": OUTSIDER}, ""),
    ("an outsider who wrote loopback before the proxy", PROXY, {"X-Forwarded-For": f"127.0.0.1, {OUTSIDER}"}, ""),
    ("a malformed X-Forwarded-For", PROXY, {"X-Forwarded-For": "localhost"}, ""),
    ("an empty hop in X-Forwarded-For", PROXY, {"X-Forwarded-For": f"{PROMETHEUS}, , {OUTSIDER}"}, ""),
    ("no address at all", "", {}, ""),
    ("an address that is not one", "unknown", {}, ""),
]
# Each let in.
ALLOWED = [
    ("loopback", "127.0.0.1", {}),
    ("all of 127/8", "127.0.0.2", {}),
    ("IPv6 loopback", "::1", {}),
    ("loopback on a dual-stack socket", "::ffff:127.0.0.1", {}),
    ("an allowed network", PROMETHEUS, {}),
    ("the token, from anywhere", OUTSIDER, {"Authorization": f"Bearer {TOKEN}"}),
    ("the token, scheme in lower case", OUTSIDER, {"Authorization": f"bearer {TOKEN}"}),
    ("the token, through an unknown proxy", OUTSIDER, {"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": "x"}),
    ("an allowed client through a trusted proxy", PROXY, {"X-Forwarded-For": PROMETHEUS}),
    (
        "whatever a client wrote before the trusted hops",
        PROXY,
        {"X-Forwarded-For": f"{OUTSIDER}, {PROMETHEUS}, {PROXY}"},
    ),
]


@pytest.fixture
def guarded(settings):
    """A token, loopback and Prometheus's network allowed, one trusted proxy; debug on, to
    show it opens nothing (it used to open /metrics to everyone)."""
    settings.DEBUG = True
    settings.STEWARD_METRICS_TOKEN = TOKEN
    settings.STEWARD_METRICS_ALLOW = [ip_network(n) for n in ("127.0.0.0/8", "::1", "192.0.2.0/24")]
    settings.STEWARD_TRUSTED_PROXIES = [ip_network(PROXY)]
    return settings


def refusals(client, cases) -> dict[str, bytes]:
    """Each case's answer body, asserting it is the one refusal."""
    bodies = {}
    for who, address, headers, query in cases:
        response = client.get(f"/metrics{query}", headers=headers, REMOTE_ADDR=address)
        assert (response.status_code, response.json()["code"]) == (403, "METRICS_FORBIDDEN"), who
        bodies[who] = response.content
    return bodies


def test_metrics_refuse_every_forged_address_and_token_and_name_no_tenant(client, db, guarded):
    task_submit(agent="t.steps", input={}, **ALICE)
    blocked_task_with_unknown_effect(tenant="globex")
    assert (
        scrape(client)[("steward_tasks", (("status", "queued"), ("tenant", "acme")))] == 1
    )  # there is a tenant to name
    bodies = refusals(client, REFUSED)
    assert len(set(bodies.values())) == 1  # one answer, whichever check failed
    (body,) = set(bodies.values())
    assert b"acme" not in body and b"globex" not in body and TOKEN.encode() not in body
    for method in (client.head, client.post):
        assert method("/metrics", REMOTE_ADDR=OUTSIDER).status_code == 405  # and says nothing either


def test_metrics_answer_the_token_and_each_allowed_address(client, db, guarded):
    task_submit(agent="t.steps", input={}, **ALICE)
    for who, address, headers in ALLOWED:
        samples = scrape(client, address, **headers)
        assert samples[("steward_tasks", (("status", "queued"), ("tenant", "acme")))] == 1, who


def test_without_a_token_only_the_allowed_addresses_and_with_none_allowed_only_the_token(client, db, guarded):
    guarded.STEWARD_METRICS_TOKEN = ""
    refusals(client, [("an empty bearer against no token", OUTSIDER, {"Authorization": "Bearer "}, "")])
    refusals(client, [("any bearer against no token", OUTSIDER, {"Authorization": "Bearer x"}, "")])
    assert ("steward_processes_live", (("kind", "worker"),)) in scrape(client, "127.0.0.1")
    guarded.STEWARD_METRICS_TOKEN = TOKEN
    guarded.STEWARD_METRICS_ALLOW = []
    refusals(client, [("loopback when nothing is allowed", "127.0.0.1", {}, "")])
    assert ("steward_processes_live", (("kind", "worker"),)) in scrape(
        client, "127.0.0.1", Authorization=f"Bearer {TOKEN}"
    )


def test_a_json_log_line_is_one_object_with_its_extras():
    record = logging.LogRecord("runtime.worker", logging.WARNING, __file__, 1, "lease of %s lost", ("t1",), None)
    record.task = "t1"
    line = json.loads(JsonFormatter().format(record))
    assert (line["level"], line["logger"], line["message"], line["task"]) == (
        "WARNING",
        "runtime.worker",
        "lease of t1 lost",
        "t1",
    )
