"""`make bench-lifecycle` (issue 25): 90 days of one tenant running 1,000 tasks a day, with
30-day retention, on the harness's controllable clock. One JSON object on stdout;
progress on stderr.

Each simulated day (the database's clock moved a day: runtime/testing.py), in bulk SQL,
no agent run: 1,000 finished tasks in 20 trees of 50, each with 5 journal rows (about
800 bytes of output each), 2 decisions, 1 gateway call (about 1.2 KB of untrusted
response) and 5 audit rows through the real link trigger (hash-chained). Then what the
supervisor and the daily job do: seal the trail, then the daily retention, timed:

    partitions_daily(retention_days=30)   journal, gateway calls and decisions: drop the
                                          partitions past 30 days, make the next 7 days'
    audit_archive(before=now - 30 days)   the audit trail, with its period set to 30 days
                                          here too: archive to JSON lines with its seals,
                                          then drop

and `audit verify` (every chain and every seal) over the live trail, every day.

    lifecycle_growth_ratio     total relation size (every table of the schema, indexes and
                               TOAST included) on day 90 over day 30; _partitioned: the
                               four partitioned tables alone; _tasks_mb_per_day: what the
                               task rows (kept as tombstones, never dropped) add a day
    retention_ms_per_day       the daily retention above: p50 and max over the 90 days
    erase_tree_ms_p50          a 50-task tree's payloads tombstoned (tasks' input and
                               output, their journal's outputs) by a direct UPDATE in one
                               transaction, on day 60, 20 trees: the erasure service is
                               not on this branch (issue 25's other part)
    audit_verify_ok_days       days on which `audit verify` passed (of 90); _ms_max
    console_p95_ms             the slowest page's p95 among the dashboard, the task list, a
                               task's page and the audit page (django.test.Client, alice
                               signed in), on day 30 and on day 90

The database is made afresh (test_steward_bench_lifecycle: the clock is for test
databases only) and dropped after; the archives go to a temporary folder.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta

import tests.bench_role  # noqa: F401 - before anything reads DATABASE_URL

DB = "test_steward_bench_lifecycle"
DAYS = int(os.environ.get("STEWARD_BENCH_LIFECYCLE_DAYS", "90"))
TASKS_A_DAY = int(os.environ.get("STEWARD_BENCH_LIFECYCLE_TASKS", "1000"))
RETENTION_DAYS = 30
TREE = 50
ERASE_DAY = 60
PAGE_REPEAT = 20
DAY = 86400

DAY_IDS = """
CREATE TEMPORARY TABLE day_ids ON COMMIT DROP AS
SELECT k, steward_uuid7(now() + k * interval '20 ms') AS id FROM generate_series(0, %(n)s - 1) k
"""
TASKS = """
INSERT INTO steward_task (id, agent, input, input_digest, tenant, owner, pool, status, epoch, next_reason,
                          parent_id, root_id, crash_count, output, status_note, created_at, updated_at,
                          queued_at, started_at, finished_at, agent_version)
SELECT d.id, 'bench.lifecycle', jsonb_build_object('n', d.k, 'question', md5(d.k::text) || md5((d.k + 1)::text)),
       md5(d.k::text), 'acme', 'user:alice', 'default', 'completed', 1, 'first',
       CASE WHEN d.k % 50 <> 0 THEN r.id END, r.id, 0,
       jsonb_build_object('answer', md5(d.k::text) || md5((d.k + 2)::text)), '', now(), now(), now(), now(),
       now() + interval '1 minute', ''
FROM day_ids d JOIN day_ids r ON r.k = d.k - d.k % 50
"""
STEPS = """
INSERT INTO steward_step (task_id, seq, name, kind, output, epoch, untrusted, started_at, finished_at)
SELECT d.id, s, 'step-' || s, 'step',
       jsonb_build_object('text', (SELECT string_agg(md5(d.k::text || '.' || s || '.' || i), '')
                                   FROM generate_series(1, 25) i)),
       1, s = 3, now(), now()
FROM day_ids d, generate_series(1, 5) s
"""
DECISIONS_AND_CALLS = """
WITH decided AS (
    INSERT INTO steward_decision (id, tenant, task_id, parent_task, epoch, actor, owner, boundary, action, resource,
                                  allowed, reason_code, policy_version, authz_revision, at)
    SELECT steward_uuid7(now() + d.k * interval '20 ms'), 'acme', d.id, NULL, 1, 'agent:bench.lifecycle',
           'user:alice', 'credential_gateway', 'model.call', 'openai:gpt-5', true, 'granted', '1', 1, now()
    FROM day_ids d, generate_series(1, 2) n
    RETURNING id, task_id
)
INSERT INTO steward_gateway_call (id, tenant, task_id, attempt_id, epoch, step_seq, jti, route, action, resource,
                                  idempotency_key, decision_id, tokens, outcome, status, receipt, response,
                                  started_at, finished_at)
SELECT steward_uuid7(now()), 'acme', c.task_id, NULL, 1, 3, md5(c.id::text), 'openai', 'model.call',
       'openai:gpt-5', 'key-' || c.task_id, c.id, 500, 'committed', 200, '{"id": "resp_1", "status": 200}',
       jsonb_build_object('untrusted', true, 'text', (SELECT string_agg(md5(c.id::text || i), '')
                                                      FROM generate_series(1, 38) i)),
       now(), now()
FROM (SELECT DISTINCT ON (task_id) id, task_id FROM decided ORDER BY task_id, id) c
"""
AUDIT = """
INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
SELECT 'worker:bench', 'acme', d.id, e.kind, jsonb_build_object('epoch', 1, 'note', md5(d.k::text || e.kind))
FROM day_ids d, unnest(ARRAY['task.submitted', 'attempt.started', 'effect.intent', 'effect.committed',
                             'task.completed']) WITH ORDINALITY e(kind, n)
ORDER BY d.k, e.n
"""
ROOTS = "SELECT id FROM day_ids WHERE k % 50 = 0 ORDER BY k"
SIZES = """
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS total,
       coalesce(sum(pg_total_relation_size(c.oid)) FILTER (
           WHERE c.relispartition AND EXISTS (
               SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid AND i.inhparent::regclass::text =
                   ANY(ARRAY['steward_audit', 'steward_decision', 'steward_gateway_call', 'steward_step']))), 0)::bigint
           AS partitioned,
       pg_total_relation_size('steward_task')::bigint AS tasks
FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
"""
ERASE_TASKS = "UPDATE steward_task SET input = '{}', output = NULL WHERE root_id = %s"
ERASE_STEPS = """
UPDATE steward_step SET output = NULL, error = NULL
WHERE task_id IN (SELECT id FROM steward_task WHERE root_id = %s)
"""


def log(message: str) -> None:
    print(f"bench-lifecycle: {message}", file=sys.stderr, flush=True)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def setup() -> None:
    import django
    import psycopg

    from tests import bench_scale

    with psycopg.connect(bench_scale.server_url("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    bench_scale.migrate(DB)
    os.environ["DATABASE_URL"] = bench_scale.server_url(DB)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("STEWARD_LOG_LEVEL", "WARNING")
    django.setup()


def load_day(cur, n: int) -> list:
    cur.execute(DAY_IDS, {"n": n})
    for statement in (TASKS, STEPS, DECISIONS_AND_CALLS, AUDIT):
        cur.execute(statement)
    cur.execute(ROOTS)
    return [row[0] for row in cur.fetchall()]


def pages(client, task_id) -> dict:
    timed = {}
    for name, url in (("dashboard", "/"), ("tasks", "/tasks/"), ("task", f"/tasks/{task_id}/"), ("audit", "/audit/")):
        for _ in range(3):
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)
        samples = []
        for _ in range(PAGE_REPEAT):
            began = time.perf_counter()
            response = client.get(url)
            samples.append((time.perf_counter() - began) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        timed[name] = round(p95(samples), 1)
    return timed


def main() -> dict:
    setup()
    from django.db import connection, transaction
    from django.test import Client

    from runtime.db import clock
    from runtime.lifecycle.archive import audit_archive
    from runtime.lifecycle.partitions import partitions_daily
    from runtime.testing import install_clock, set_clock_skew
    from runtime.trail.seals import audit_seal_now
    from runtime.trail.services import audit_check
    from tests.people import make_people
    from tests.pools import pool_with

    install_clock()
    pool_with("default", actor="bench", max_running=8, max_queued=1_000_000)
    alice = make_people().alice
    client = Client(HTTP_HOST="localhost")
    client.force_login(alice)
    archives = tempfile.mkdtemp(prefix="steward-bench-lifecycle-")

    retention_ms, verify_ms, verified, sizes, consoles, erase_ms = [], [], 0, {}, {}, []
    roots_by_day: dict[int, list] = {}
    began = time.monotonic()
    for day in range(DAYS):
        set_clock_skew(day * DAY)
        with transaction.atomic(), connection.cursor() as cur:
            roots_by_day[day] = load_day(cur, TASKS_A_DAY)
        audit_seal_now()

        started = time.perf_counter()
        now = clock()
        partitions_daily(retention_days=RETENTION_DAYS, actor="system:retention", now=now)
        audit_archive(before=now - timedelta(days=RETENTION_DAYS), out=archives, actor="system:retention")
        retention_ms.append((time.perf_counter() - started) * 1000)

        started = time.perf_counter()
        check = audit_check()
        verify_ms.append((time.perf_counter() - started) * 1000)
        verified += check.ok
        if not check.ok:
            log(f"day {day + 1}: audit verify FAILED: {check.first_bad} {check.seals[:3]}")

        if day + 1 == ERASE_DAY:
            for root in roots_by_day[day - 20]:
                started = time.perf_counter()
                with transaction.atomic(), connection.cursor() as cur:
                    cur.execute(ERASE_TASKS, [root])
                    cur.execute(ERASE_STEPS, [root])
                erase_ms.append((time.perf_counter() - started) * 1000)
        if day + 1 in (30, DAYS):
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute("SET LOCAL statement_timeout = 0")  # the settings' bound is for the runtime's statements
                cur.execute("ANALYZE")
                cur.execute(SIZES)
                total, partitioned, tasks = cur.fetchone()
            sizes[day + 1] = {"total": total, "partitioned": partitioned, "tasks": tasks}
            consoles[day + 1] = pages(client, roots_by_day[day][0])
            log(f"day {day + 1}: {sizes[day + 1]}, pages p95 {consoles[day + 1]}")
        if (day + 1) % 10 == 0:
            log(
                f"day {day + 1}: retention {retention_ms[-1]:.0f} ms, verify {verify_ms[-1]:.0f} ms, "
                f"{time.monotonic() - began:.0f} s so far"
            )
    set_clock_skew(0.0)

    last, first = sizes[DAYS], sizes[30]
    result = {
        "lifecycle_days": DAYS,
        "lifecycle_tasks_a_day": TASKS_A_DAY,
        "lifecycle_growth_ratio": round(last["total"] / first["total"], 3),
        "lifecycle_growth_ratio_partitioned": round(last["partitioned"] / first["partitioned"], 3),
        "lifecycle_mb_day30": round(first["total"] / 2**20, 1),
        "lifecycle_mb_day90": round(last["total"] / 2**20, 1),
        "lifecycle_tasks_mb_per_day": round((last["tasks"] - first["tasks"]) / 2**20 / (DAYS - 30), 2),
        "retention_ms_per_day": round(statistics.median(retention_ms), 1),
        "retention_ms_per_day_max": round(max(retention_ms), 1),
        "erase_tree_ms_p50": round(statistics.median(erase_ms), 1) if erase_ms else None,
        "erase_tree_note": "direct UPDATE of the tree's task and journal payloads: no erasure service on this branch",
        "audit_verify_ok_days": verified,
        "audit_verify_ms_max": round(max(verify_ms), 1),
        "console_p95_ms": max(max(pages.values()) for pages in consoles.values()),
        "console_pages_p95_ms": consoles,
        "lifecycle_bench_s": round(time.monotonic() - began),
    }
    connection.close()
    import psycopg

    from tests import bench_scale

    with psycopg.connect(bench_scale.server_url("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
