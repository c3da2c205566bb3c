"""/metrics: the Prometheus text format, read from PostgreSQL at scrape time, and closed
outside debug unless the scraper sends STEWARD_METRICS_TOKEN. JSON log lines."""

from __future__ import annotations

import json
import logging

from prometheus_client.parser import text_string_to_metric_families

from console.logs import JsonFormatter
from runtime.fleet.services import process_beat
from runtime.meter import WAIT_BOUNDS
from runtime.tasks.services import task_submit
from tests.api.world import ALICE, blocked_task_with_unknown_effect


def scrape(client, **headers) -> dict:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_read_tasks_effects_pools_and_each_processes_counters_from_the_database(client, db, settings):
    settings.DEBUG = True  # open in debug (the test runner turns DEBUG off)
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
    assert m[("steward_processes_live", (("kind", "worker"),))] == 1
    assert ("steward_last_sweep_timestamp_seconds", ()) in m


def test_metrics_outside_debug_need_the_metrics_token(client, db, settings):
    settings.DEBUG = False
    settings.STEWARD_METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 401  # unset: closed to everyone
    settings.STEWARD_METRICS_TOKEN = "s3cret"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    scrape(client, Authorization="Bearer s3cret")


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
