"""`make bench-scale`: what Steward's everyday operations cost beside a million finished
tasks, against the same operations on an empty database. One JSON object on stdout;
progress on stderr.

It loads (once; later runs reuse the database if it holds the same load):

    1,000,000 finished tasks (5% children in trees), 10 tenants and a tiny one,
    2,000,000 attempts, 5,000,000 journal rows, 2,000,000 effects,
    10,000,000 audit rows, hash-chained exactly as the trigger chains them (the rows
    are hashed here and copied in with the link trigger off; the run's `audit verify`
    proves every chain),

then measures, on it and on an empty database, with real `celery worker` processes:

    submit_ms          task_submit() one by one, median
    dispatch_ms_p50    submit to the first step's start on an idle worker
    claim_ms           claim.sql on a pool with queued tasks (in a rolled-back transaction)
    sweep_ms           one supervisor sweep
    stale_probe_ms_backlog  the sweep's re-dispatch probe with 50,000 tasks queued (and
                       _before: the statement it replaced), in a rolled-back transaction
    pages_ms           each list and page query the CLI, API and console use, median of 5
    verify_rows_per_s  `audit verify` over the whole trail
    seal_check_ms      the supervisor's seal check (which tenants are due), median of 21
    seal_make_ms       one seal of the busiest tenant: on the loaded database, the seals
                       that bring a never-sealed trail up to date (median; _max, the
                       slowest; seal_heads_max, the most heads one named; seal_catch_up_s
                       and seals_made, all of them), as the first look after an upgrade
                       or a burst meets it; on the empty one, a seal after 50 submits
    sweep_seal_look_ms a whole sweep whose seal look runs (median of 5), once sealed
    seal_verify_s      the seal part of `audit verify` for the busiest tenant

and, on the loaded database, the statements this work replaced ("before"): the old list
queries and pool usage, the old seal check beside a version 1 seal of 100,000 heads (and
the new check beside the same seal), and with STEWARD_BENCH_SCALE_BEFORE=1 the old audit
verify and the old first seal of the busiest tenant.

STEWARD_BENCH_SCALE_DB (default steward_scale_bench) and STEWARD_BENCH_SCALE_TASKS
(default 1000000) choose the database and the load; the empty one is <db>_empty.
Check free disk first: the load takes about 8 GB.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import tests.bench_role  # noqa: F401 - before anything reads DATABASE_URL

SCALE_DB = os.environ.get("STEWARD_BENCH_SCALE_DB", "steward_scale_bench")
TASKS = int(os.environ.get("STEWARD_BENCH_SCALE_TASKS", "1000000"))
LOAD_VERSION = 1  # change when the load's shape changes
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SPAN_DAYS = 30


def log(message: str) -> None:
    print(f"bench-scale: {message}", file=sys.stderr, flush=True)


def server_url(path: str) -> str:
    return urlunsplit(urlsplit(os.environ["DATABASE_URL"])._replace(path=f"/{path}"))


# --- the databases ----------------------------------------------------------------------------


def prepare_databases() -> bool:
    """Create the empty database afresh; keep the loaded one if it holds this load.
    Returns whether the loaded database must be (re)loaded."""
    import psycopg

    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {SCALE_DB}_empty WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {SCALE_DB}_empty")
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [SCALE_DB]).fetchone()
    if exists:
        with psycopg.connect(server_url(SCALE_DB), autocommit=True) as conn:
            marker = conn.execute("SELECT to_regclass('bench_scale_load') IS NOT NULL").fetchone()[0]
            if marker:
                row = conn.execute("SELECT tasks, version, migration FROM bench_scale_load").fetchone()
                latest = conn.execute("SELECT max(name) FROM django_migrations WHERE app = 'runtime'").fetchone()[0]
                if row == (TASKS, LOAD_VERSION, latest_migration()) and latest == row[2]:
                    log(f"reusing {SCALE_DB} ({TASKS:,} tasks)")
                    return False
    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {SCALE_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {SCALE_DB}")
    return True


def latest_migration() -> str:
    from pathlib import Path

    names = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "runtime" / "migrations").glob("0*.py"))
    return names[-1]


def migrate(db: str) -> None:
    import subprocess

    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], check=True, env={**os.environ, "DATABASE_URL": server_url(db)}
    )


# --- the load ------------------------------------------------------------------------------


LOAD_SQL = """
SET session_replication_role = replica;  -- no FK checks, no triggers: this load is consistent by construction
CREATE UNLOGGED TABLE bench_scale_rank AS
SELECT k, steward_uuid7(at) AS id, at
FROM generate_series(1, %(n)s) k,
     LATERAL (SELECT now() - interval '%(days)s days' + (k::float8 / %(n)s) * interval '%(days)s days') t(at);
CREATE UNIQUE INDEX ON bench_scale_rank (k);

-- Family f = k / 20: task 20f is a root; 20f+1 .. 20f+4 are its children (5% of tasks).
INSERT INTO steward_task (id, agent, input, input_digest, tenant, owner, pool, status, epoch, next_reason,
                          parent_id, root_id, spawn_seq, idempotency_key, crash_count, wake_at, waiting_on,
                          output, error, status_note, created_at, updated_at, queued_at, started_at, finished_at)
SELECT r.id, a.agent, jsonb_build_object('n', r.k % 7, 'label', 'job-' || r.k), md5(r.k::text), t.tenant,
       'user:' || t.tenant, CASE WHEN a.agent = 'research.batch' THEN 'research' ELSE 'default' END,
       s.status, 2, 'resume',
       p.id, coalesce(p.id, r.id), CASE WHEN p.id IS NOT NULL THEN r.k %% 20 - 1 END, NULL, 0, NULL, NULL,
       CASE WHEN s.status = 'completed' THEN jsonb_build_object('total', r.k %% 1000) END,
       CASE WHEN s.status = 'failed' THEN '{"code": "AGENT_ERROR", "type": "RuntimeError", "message": "boom"}'::jsonb END,
       '', r.at, r.at + interval '95 ms', r.at + interval '60 ms', r.at + interval '10 ms', r.at + interval '95 ms'
FROM bench_scale_rank r
LEFT JOIN bench_scale_rank p ON r.k %% 20 BETWEEN 1 AND 4 AND p.k = r.k - r.k %% 20
CROSS JOIN LATERAL (SELECT CASE WHEN (r.k / 20) %% 500 = 7 THEN 'tiny'
                                WHEN (r.k / 20) %% 2 = 0 THEN 'acme'
                                ELSE 'tenant-' || ((r.k / 20) %% 9) END) t(tenant)
CROSS JOIN LATERAL (SELECT CASE WHEN r.k %% 100 = 0 THEN 't.rare'
                                WHEN r.k %% 10 < 3 THEN 'research.batch' ELSE 't.steps' END) a(agent)
CROSS JOIN LATERAL (SELECT CASE WHEN r.k %% 50 = 0 THEN 'failed'
                                WHEN r.k %% 97 = 0 THEN 'cancelled' ELSE 'completed' END) s(status);

-- Two attempts each: the first slept, the second finished. Ids 2k-1 and 2k.
INSERT INTO steward_attempt (id, task_id, epoch, worker, reason, started_at, heartbeat_at, lease_expires_at,
                             ended_at, end_reason)
SELECT 2 * r.k - 2 + e, r.id, e, 'host-' || (r.k %% 4) || ':' || (1000 + r.k %% 8),
       CASE e WHEN 1 THEN 'first' ELSE 'resume' END,
       r.at + (e * 40 - 30) * interval '1 ms', r.at + (e * 40 - 20) * interval '1 ms',
       r.at + interval '30 s', r.at + (e * 40 - 5) * interval '1 ms', CASE e WHEN 1 THEN 'sleep' ELSE 'complete' END
FROM bench_scale_rank r, generate_series(1, 2) e;

-- Five journal rows each: two steps, an effect, the sleep, an effect.
INSERT INTO steward_step (task_id, seq, name, kind, output, error, epoch, started_at, finished_at)
SELECT r.id, q, (ARRAY['fetch', 'plan', 'notify', 'sleep', 'publish'])[q + 1],
       (ARRAY['step', 'step', 'effect', 'sleep', 'effect'])[q + 1],
       jsonb_build_object('v', r.k %% 1000 + q), NULL, CASE WHEN q < 4 THEN 1 ELSE 2 END,
       r.at + (10 + q * 8) * interval '1 ms', r.at + (12 + q * 8) * interval '1 ms'
FROM bench_scale_rank r, generate_series(0, 4) q;

-- Two effects each (steps 2 and 4), committed. Ids 2k-1 and 2k, by the attempt that sent them.
INSERT INTO steward_effect (id, key, task_id, tenant, step_seq, name, effect_class, keyed, state, request_digest,
                            receipt, error, attempt_id, epoch, sends, resend_approved, created_at, settled_at,
                            resolved_by, resolution_note)
SELECT 2 * r.k - 2 + e, r.id || '/' || (e * 2) || '/' || CASE e WHEN 1 THEN 'notify' ELSE 'publish' END, r.id,
       (SELECT t.tenant FROM steward_task t WHERE t.id = r.id),
       e * 2, CASE e WHEN 1 THEN 'notify' ELSE 'publish' END, 'reversible', true, 'committed', md5(r.k::text),
       jsonb_build_object('ref', 'r' || r.k || '-' || e), NULL, 2 * r.k - 2 + e, e, 1, false,
       r.at + (e * 40 - 10) * interval '1 ms', r.at + (e * 40 - 8) * interval '1 ms', '', ''
FROM bench_scale_rank r, generate_series(1, 2) e;

SELECT setval(pg_get_serial_sequence('steward_attempt', 'id'), 2 * %(n)s);
SELECT setval(pg_get_serial_sequence('steward_effect', 'id'), 2 * %(n)s);
"""


def jsonb_text(value) -> str:
    """jsonb's canonical text form (what `data::text` prints, and so what the hash reads):
    object keys shortest first, then bytewise; ', ' and ': ' between items."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode()))
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {jsonb_text(v)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(jsonb_text(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def audit_rows(k: int, task_id: str, tenant: str, agent: str, parent: str | None, created_us: int):
    """A finished task's ten audit rows, as the runtime writes them: (offset in ms, actor,
    kind, data)."""
    worker = f"worker:host-{k % 4}:{1000 + k % 8}"
    pool = "research" if agent == "research.batch" else "default"
    submitted = {"agent": agent, "pool": pool, "owner": f"user:{tenant}"}
    if parent:
        submitted["parent"] = parent
    actor = f"task:{parent}" if parent else f"user:{tenant}"
    rows = [(0, actor, "task.submitted", submitted), (10, worker, "attempt.started", {"epoch": 1, "reason": "first"})]
    for epoch, (seq, name) in ((1, (2, "notify")), (2, (4, "publish"))):
        effect, key = 2 * k - 2 + epoch, f"{task_id}/{seq}/{name}"
        base = 40 * epoch - 10
        if epoch == 2:
            rows += [
                (45, f"supervisor:host-0:{900 + k % 3}", "task.woken", {"by": "timer"}),
                (50, worker, "attempt.started", {"epoch": 2, "reason": "resume"}),
            ]
        rows += [
            (
                base,
                worker,
                "effect.intent",
                {
                    "effect": effect,
                    "key": key,
                    "epoch": epoch,
                    "class": "reversible",
                    "keyed": True,
                    "step": seq,
                    "attempt": effect,
                },
            ),
            (
                base + 2,
                worker,
                "effect.committed",
                {"effect": effect, "key": key, "epoch": epoch, "receipt": {"ref": f"r{k}-{epoch}"}, "error": None},
            ),
        ]
        if epoch == 1:
            rows.append((36, worker, "task.sleeping", {"epoch": 1}))
    rows.append((95, worker, "task.completed", {"epoch": 2}))
    return [(created_us + ms * 1000, actor_, kind, data) for ms, actor_, kind, data in rows]


def load(conn, *, db: str = SCALE_DB, tasks: int = TASKS) -> None:
    """The tasks and their records set-wise in SQL; the audit trail hashed here and copied
    in, blocks of 1,000 tasks interleaved by kind (as concurrent tasks interleave). Also
    the console bench's load (tests/bench_console.py), with fewer tasks."""
    started = time.monotonic()
    with conn.cursor() as cur:
        for statement in LOAD_SQL.replace("%(n)s", str(tasks)).replace("%(days)s", str(SPAN_DAYS)).split(";\n"):
            if statement.strip():
                cur.execute(statement.replace("%%", "%"))
    conn.commit()
    log(f"tasks, attempts, journal, effects loaded in {time.monotonic() - started:.0f} s")

    import psycopg

    started = time.monotonic()
    written = 0
    # The tasks are read on a second connection: this one is busy with the COPY.
    with conn.cursor() as cur, psycopg.connect(server_url(db)) as reader:
        cur.execute("ALTER TABLE steward_audit DISABLE TRIGGER steward_audit_link")
        fetch = reader.cursor(name="ranks")
        fetch.itersize = 20_000
        fetch.execute("""
            SELECT r.k, t.id::text, t.tenant, t.agent, t.parent_id::text,
                   (extract(epoch FROM t.created_at) * 1000000)::bigint
            FROM bench_scale_rank r JOIN steward_task t ON t.id = r.id ORDER BY r.k""")
        with cur.copy(
            "COPY steward_audit (chain, chain_seq, at, actor, tenant, task_id, kind, data, prev_hash, hash) FROM STDIN"
        ) as copy:
            block = []
            for task in fetch:
                block.append(task)
                if len(block) == 1000:
                    written += copy_block(copy, block)
                    block = []
                    if written % 1_000_000 == 0:
                        log(f"{written:,} audit rows")
            written += copy_block(copy, block)
        fetch.close()
        reader.commit()  # let go of bench_scale_rank
        cur.execute("ALTER TABLE steward_audit ENABLE TRIGGER steward_audit_link")
        cur.execute("DROP TABLE bench_scale_rank")
    conn.commit()
    log(f"{written:,} audit rows hashed and copied in {time.monotonic() - started:.0f} s")


def copy_block(copy, block) -> int:
    chained = []
    for k, task_id, tenant, agent, parent, created_us in block:
        chain, prev = f"task:{task_id}", b""
        for seq, (at_us, actor, kind, data) in enumerate(audit_rows(k, task_id, tenant, agent, parent, created_us), 1):
            text = jsonb_text(data)
            digest = hashlib.sha256(
                "\x1f".join([prev.hex(), chain, str(seq), str(at_us), actor, tenant, task_id, kind, text]).encode()
            ).digest()
            chained.append(
                (
                    seq,
                    k,
                    (
                        chain,
                        seq,
                        EPOCH + timedelta(microseconds=at_us),
                        actor,
                        tenant,
                        task_id,
                        kind,
                        text,
                        prev,
                        digest,
                    ),
                )
            )
            prev = digest
    chained.sort(key=lambda row: (row[0], row[1]))  # a block's rows by kind, then task: interleaved
    for _, _, row in chained:
        copy.write_row(row)
    return len(chained)


# --- measurements ---------------------------------------------------------------------------


def median_ms(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def measure(db: str, *, loaded: bool) -> dict:
    from django.db import connection, transaction

    from runtime import db as rdb
    from runtime import paging
    from runtime.effects.selectors import EFFECTS_BY_ID, effect_page
    from runtime.limits.selectors import pool_usage
    from runtime.tasks.selectors import TASKS_BY_ID, task_page
    from runtime.tasks.services import task_submit
    from runtime.trail.selectors import AUDIT_BY_TIME, audit_page
    from runtime.worker.supervisor import sweep
    from tests.pools import pool_with

    for pool in ("default", "research", "bench", "bench-claim"):
        pool_with(pool, actor="bench", max_running=8, max_queued=100_000)
    figures: dict = {}

    submits = []
    for _ in range(200):
        started = time.perf_counter()
        task_submit(agent="t.steps", input={"n": 1}, tenant="bench", owner="bench", actor="bench", pool="bench-claim")
        submits.append((time.perf_counter() - started) * 1000)
    figures["submit_ms"] = round(statistics.median(submits), 2)

    class Rollback(Exception):
        pass

    from runtime import agents

    names, versions = agents.served()
    claim_params = {"pool": "bench-claim", "worker": "bench", "credential": None, "agents": names, "versions": versions}
    claims = []
    for _ in range(50):
        try:
            with transaction.atomic():
                started = time.perf_counter()
                assert rdb.fetchone("claim", {**claim_params, "lease": 30.0}) is not None
                claims.append((time.perf_counter() - started) * 1000)
                raise Rollback
        except Rollback:
            pass
    figures["claim_ms"] = round(statistics.median(claims), 2)
    if loaded:
        # The load's trail starts never sealed on every run (a previous run sealed it): the
        # first sweep's seal look then meets what the first look after a burst or an
        # upgrade meets, and seal_figures() measures the rest of the catch-up.
        with connection.cursor() as cur:
            cur.execute("TRUNCATE steward_audit_seal_head, steward_audit_seal")
    sweeps = []
    for _ in range(11):
        started = time.perf_counter()
        sweep(supervisor_id="bench")
        sweeps.append((time.perf_counter() - started) * 1000)
    figures["sweep_ms"] = round(statistics.median(sweeps), 2)
    figures["sweep_ms_first"] = round(sweeps[0], 2)  # the one whose seal look ran
    figures.update(stale_probe_ms())

    with connection.cursor() as cur:
        cur.execute(
            "SELECT id FROM steward_task WHERE tenant = 'acme' ORDER BY id LIMIT 1 OFFSET "
            "(SELECT count(*) / 2 FROM steward_task WHERE tenant = 'acme')"
            if loaded
            else "SELECT id FROM steward_task ORDER BY id LIMIT 1"
        )
        middle_task = cur.fetchone()[0]
        cur.execute(
            "SELECT id FROM steward_task WHERE parent_id IS NULL AND EXISTS "
            "(SELECT 1 FROM steward_task c WHERE c.parent_id = steward_task.id) ORDER BY id DESC LIMIT 1"
        )
        parent = (cur.fetchone() or [middle_task])[0]
        cur.execute("SELECT max(id) / 2 FROM steward_effect")
        middle_effect = cur.fetchone()[0] or 1
        cur.execute(
            "SELECT at, id FROM steward_audit WHERE tenant = 'acme' ORDER BY id LIMIT 1 OFFSET "
            "(SELECT count(*) / 2 FROM steward_audit WHERE tenant = 'acme')"
            if loaded
            else "SELECT now(), 1"
        )
        middle_audit = cur.fetchone()
    day_ago = datetime.now(UTC) - timedelta(days=1)

    def deep(keyset, filters: dict, key: tuple) -> str:
        return paging.encode_cursor(keyset, filters, key)

    task_filters = dict.fromkeys(
        ("tenant", "status", "agent", "pool", "parent", "root", "created_after", "created_before")
    )
    pages = {
        "tasks": lambda: task_page(limit=50),
        "tasks_deep": lambda: task_page(limit=50, after=deep(TASKS_BY_ID, task_filters, (middle_task,))),
        "tasks_tenant": lambda: task_page(tenant="acme", limit=50),
        "tasks_tenant_deep": lambda: task_page(
            tenant="acme", limit=50, after=deep(TASKS_BY_ID, {**task_filters, "tenant": "acme"}, (middle_task,))
        ),
        "tasks_small_tenant": lambda: task_page(tenant="tiny", limit=50),
        "tasks_status": lambda: task_page(status="failed", limit=50),
        "tasks_tenant_status": lambda: task_page(tenant="acme", status="failed", limit=50),
        "tasks_tenant_last_day": lambda: task_page(tenant="acme", created_after=day_ago, limit=50),
        "tasks_rare_agent": lambda: task_page(tenant="acme", agent="t.rare", limit=50),
        "tasks_children": lambda: task_page(parent=parent, limit=50),
        "tasks_tree": lambda: task_page(root=parent, limit=50),
        "effects": lambda: effect_page(limit=50),
        "effects_deep": lambda: effect_page(
            limit=50, after=deep(EFFECTS_BY_ID, dict.fromkeys(("task", "state", "effect_class")), (middle_effect,))
        ),
        "effects_state": lambda: effect_page(state="committed", limit=50),
        "effects_task": lambda: effect_page(task=middle_task, limit=50),
        "audit_tenant": lambda: audit_page(tenant="acme", limit=50),
        "audit_tenant_deep": lambda: audit_page(
            tenant="acme",
            limit=50,
            after=deep(
                AUDIT_BY_TIME,
                {"tenant": "acme", **dict.fromkeys(("task", "actor", "kind", "since", "until"))},
                tuple(middle_audit),
            ),
        ),
        "audit_task": lambda: audit_page(tenant="acme", task=middle_task, limit=50),
        "audit_last_day": lambda: audit_page(tenant="acme", since=day_ago, limit=50),
        "audit_actor": lambda: audit_page(tenant="acme", actor="user:acme", limit=50),
        "pools": pool_usage,
    }
    for fn in pages.values():
        fn()  # warm: first plans, first pages into the cache
    figures["pages_ms"] = {name: median_ms(fn) for name, fn in pages.items()}
    figures["pages_ms_max"] = max(figures["pages_ms"].values())
    figures.update(seal_figures(loaded=loaded))
    return figures


def seal_figures(*, loaded: bool) -> dict:
    """What sealing the audit trail costs (runtime/trail/seals.py, issue 20): the
    check every supervisor's look makes, making seals (on the loaded database, every
    seal it takes to bring the never-sealed trail up to date, one after another as
    looks would), a sweep whose seal look runs, and the seals' part of verify."""
    from runtime import db as rdb
    from runtime.tasks.services import task_submit
    from runtime.trail.seals import SEAL_ROWS, audit_seal_now, seal_problems, seal_tenant
    from runtime.worker import supervisor

    tenant = "acme" if loaded else "bench"
    figures: dict = {}
    if not loaded:
        for _ in range(50):
            task_submit(agent="t.steps", input={"n": 1}, tenant="bench", owner="bench", actor="bench", pool="bench")
    made, started = [], time.monotonic()
    while True:
        began = time.perf_counter()
        seal = seal_tenant(tenant)
        if seal is None:
            break
        made.append(((time.perf_counter() - began) * 1000, seal.chains))
        if not seal.behind:
            break
        if len(made) % 50 == 0:
            log(f"sealing {tenant}: {len(made)} seals, {time.monotonic() - started:.0f} s")
    if made:
        figures["seal_make_ms"] = round(statistics.median(ms for ms, _ in made), 1)
        figures["seal_make_ms_max"] = round(max(ms for ms, _ in made), 1)
        figures["seal_heads_max"] = max(n for _, n in made)
        figures["seals_made"] = len(made)
        figures["seal_catch_up_s"] = round(time.monotonic() - started, 1)
        figures["seal_rows_bound"] = 2 * SEAL_ROWS
    audit_seal_now()  # the other tenants, unmeasured: the look below is then the steady state's
    check = lambda: rdb.fetchall("audit_seal_due", {"every": 3600})  # noqa: E731
    check()
    figures["seal_check_ms"] = median_ms(check, repeat=21)

    def look():
        supervisor._last_seal_look[0] = float("-inf")
        supervisor.sweep(supervisor_id="bench")

    figures["sweep_seal_look_ms"] = median_ms(look)
    started = time.monotonic()
    problems = seal_problems(tenant=tenant)
    figures["seal_verify_s"] = round(time.monotonic() - started, 2)
    if problems:
        raise SystemExit(f"bench-scale: the seals do not verify: {problems[:3]}")
    return figures


OLD_STALE_QUEUED = """
SELECT DISTINCT t.pool FROM steward_task t
WHERE t.status = 'queued' AND t.queued_at < now() - make_interval(secs => 1)
  AND EXISTS (SELECT 1 FROM steward_slot s JOIN steward_pool p ON p.name = s.pool
              WHERE s.pool = t.pool AND s.task_id IS NULL AND s.number < p.max_running)
"""


def stale_probe_ms(backlog: int = 50_000) -> dict:
    """The sweep's re-dispatch probe with `backlog` tasks queued for a minute, now and as
    it was (it read the whole backlog), in a transaction rolled back afterwards."""
    from django.db import connection, transaction

    from runtime.db import sql

    class Rollback(Exception):
        pass

    figures = {}
    try:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("ALTER TABLE steward_task DISABLE TRIGGER steward_pool_count_insert")
            cur.execute(
                """
                INSERT INTO steward_task (id, agent, input, input_digest, tenant, owner, pool, status, epoch,
                                          next_reason, crash_count, status_note, created_at, updated_at, queued_at)
                SELECT steward_uuid7(now()), 't.steps', '{}', md5(g::text), 'bench', 'bench', 'bench', 'queued', 0,
                       'first', 0, '', now(), now(), now() - interval '1 minute'
                FROM generate_series(1, %s) g""",
                [backlog],
            )
            cur.execute("ANALYZE steward_task")
            probe = sql("stale_queued")
            figures["stale_probe_ms_backlog"] = median_ms(lambda: cur.execute(probe, {"age": 1.0}) or cur.fetchall())
            figures["stale_probe_ms_backlog_before"] = median_ms(
                lambda: cur.execute(OLD_STALE_QUEUED) or cur.fetchall()
            )
            raise Rollback
    except Rollback:
        pass
    return figures


def verify_rate() -> tuple[float, int]:
    from runtime.trail.services import audit_verify

    heard = []
    started = time.monotonic()
    bad = audit_verify(progress=heard.append)
    seconds = time.monotonic() - started
    if bad is not None:
        raise SystemExit(f"bench-scale: the loaded trail does not verify: {bad}")
    rows = heard[-1].rows if heard else 0
    return (rows / seconds if seconds else 0.0), rows


def dispatch_p50(fleet_env: dict, n: int = 40) -> float:
    from runtime.models import Step, Task
    from runtime.tasks.services import task_submit
    from tests.harness import Fleet

    fleet = Fleet(fleet_env)
    try:
        fleet.workers(1)
        samples = []
        for _ in range(n):
            submitted = time.time()
            task_id = task_submit(
                agent="t.steps", input={"n": 1}, tenant="bench", owner="bench", actor="bench", pool="bench"
            ).task_id
            deadline = time.monotonic() + 30
            while not Task.objects.filter(id=task_id, status="completed").exists():
                if time.monotonic() > deadline:
                    raise SystemExit("bench-scale: a dispatch task did not finish")
                time.sleep(0.002)
            samples.append((Step.objects.get(task_id=task_id, seq=0).started_at.timestamp() - submitted) * 1000)
        return round(statistics.median(samples), 2)
    finally:
        fleet.stop_all()


BEFORE = {
    # The statements items 7-10 replaced, on the same data (runtime/tasks/selectors.py before).
    "tasks_list_ms": "SELECT * FROM steward_task ORDER BY created_at DESC LIMIT 30",
    "effects_list_ms": "SELECT * FROM steward_effect ORDER BY created_at DESC LIMIT 30",
    "pools_ms": """SELECT p.name, count(t.id) FILTER (WHERE t.status = 'running'),
                          count(t.id) FILTER (WHERE t.status = 'queued')
                   FROM steward_pool p LEFT JOIN steward_task t ON t.pool = p.name GROUP BY p.name""",
}
OLD_VERIFY = """
WITH checked AS (
    SELECT id, chain, chain_seq, hash, prev_hash, lag(hash) OVER w AS expected_prev,
           lag(chain_seq) OVER w AS previous_seq,
           steward_audit_hash(prev_hash, chain, chain_seq, at, actor, tenant, task_id, kind, data) AS recomputed
    FROM steward_audit WINDOW w AS (PARTITION BY chain ORDER BY chain_seq))
SELECT id FROM checked
WHERE hash <> recomputed OR prev_hash <> coalesce(expected_prev, ''::bytea) OR chain_seq <> coalesce(previous_seq, 0) + 1
ORDER BY id LIMIT 1
"""


# The seal's first statement before issue 20 (runtime/sql/audit_seal_heads.sql then): the
# head of every chain with an event since the last seal less the lookback, all of them;
# for a tenant never sealed, since the beginning.
OLD_SEAL_HEADS = """
SELECT DISTINCT ON (a.chain) a.chain, a.chain_seq, a.hash
FROM steward_audit a
WHERE a.tenant = %(tenant)s AND a.at >= %(since)s
ORDER BY a.chain, a.chain_seq DESC
"""


def before_figures() -> dict:
    from django.db import connection

    figures = {}
    with connection.cursor() as cur:
        for name, statement in BEFORE.items():
            figures[name] = median_ms(lambda: cur.execute(statement) or cur.fetchall(), repeat=3)
    if os.environ.get("STEWARD_BENCH_SCALE_BEFORE") == "1":
        from django.db import transaction

        log("the old audit verify (a window over the whole trail, sorted)")
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("SET LOCAL statement_timeout = 0")  # one statement over the whole trail
            started = time.monotonic()
            cur.execute(OLD_VERIFY)
            cur.fetchall()
            figures["verify_seconds"] = round(time.monotonic() - started, 1)
    figures.update(seal_check_before())
    if os.environ.get("STEWARD_BENCH_SCALE_BEFORE") == "1":
        log("the old first seal of acme (every chain head since the beginning)")
        from django.db import transaction

        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("SET LOCAL statement_timeout = 0")
            started = time.monotonic()
            cur.execute(OLD_SEAL_HEADS, {"tenant": "acme", "since": EPOCH})
            rows = cur.fetchall()
            figures["seal_make_ms"] = round((time.monotonic() - started) * 1000, 1)
        heads = {chain: [n, bytes(h).hex()] for chain, n, h in rows}  # the old seal's one JSON value
        figures["seal_heads"] = len(heads)
        figures["seal_bytes"] = len(json.dumps(heads))
    return figures


def seal_check_before(chains: int = 100_000) -> dict:
    """The seal check as it was (each tenant's latest seal read whole, heads and all) and
    as it is, beside a version 1 seal of `chains` heads (about 9.7 MB of JSON, as the issue
    measured) as acme's latest: written in a transaction rolled back afterwards."""
    from django.db import connection, transaction

    from runtime import db as rdb
    from runtime.models import AuditSeal
    from runtime.trail.selectors import audit_tenants

    class Rollback(Exception):
        pass

    figures = {}
    try:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(
                """
                INSERT INTO steward_audit_seal (tenant, seq, sealed_at, version, heads, behind, key_id, prev_mac, mac)
                SELECT 'acme', coalesce((SELECT max(seq) FROM steward_audit_seal WHERE tenant = 'acme'), 0) + 1,
                       now(), 1, jsonb_object_agg('task:' || gen_random_uuid(),
                                                  jsonb_build_array(10, encode(sha256(g::text::bytea), 'hex'))),
                       false, 'bench', '', ''
                FROM generate_series(1, %s) g""",
                [chains],
            )
            tenants = audit_tenants()

            def old_check():
                for tenant in tenants:
                    AuditSeal.objects.filter(tenant=tenant).order_by("-seq").first()

            figures["seal_check_ms"] = median_ms(old_check)
            figures["seal_check_ms_after"] = median_ms(lambda: rdb.fetchall("audit_seal_due", {"every": 60}))
            figures["seal_check_chains"] = chains
            raise Rollback
    except Rollback:
        pass
    return figures


# A sample of audit rows as they are, and as the same rows were written before this work:
# hashes as 64 hex characters, attempt.started repeating its worker, attempt ends
# repeating their event, task.submitted carrying null key and parent.
ROW_BYTES = """
SELECT avg(pg_column_size(ROW(a.id, a.chain, a.chain_seq, a.at, a.actor, a.tenant, a.task_id, a.kind, a.data,
                              a.prev_hash, a.hash))),
       avg(pg_column_size(ROW(a.id, a.chain, a.chain_seq, a.at, a.actor, a.tenant, a.task_id, a.kind,
           CASE WHEN a.kind = 'attempt.started' THEN a.data || jsonb_build_object('worker', substr(a.actor, 8))
                WHEN a.kind IN ('task.completed', 'task.failed', 'task.sleeping', 'task.waiting', 'task.blocked',
                                'task.queued')
                THEN a.data || jsonb_build_object('event', CASE a.kind WHEN 'task.completed' THEN 'complete'
                    WHEN 'task.failed' THEN 'fail' WHEN 'task.sleeping' THEN 'sleep' WHEN 'task.waiting' THEN 'wait'
                    WHEN 'task.blocked' THEN 'block' ELSE 'yield' END)
                WHEN a.kind = 'task.submitted' THEN '{"key": null, "parent": null}'::jsonb || a.data
                ELSE a.data END,
           encode(a.prev_hash, 'hex')::varchar(64), encode(a.hash, 'hex')::varchar(64))))
FROM (SELECT * FROM steward_audit TABLESAMPLE SYSTEM (1) REPEATABLE (7)) a
"""


def sizes() -> dict:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("""
            SELECT pg_database_size(current_database()),
                   pg_total_relation_size('steward_audit'), pg_relation_size('steward_audit'),
                   (SELECT count(*) FROM steward_task), (SELECT count(*) FROM steward_audit)""")
        db_bytes, audit_total, audit_heap, tasks, audit = cur.fetchone()
        cur.execute(ROW_BYTES)
        now, before = cur.fetchone()
        cur.execute(
            "SELECT pg_total_relation_size('steward_audit_seal_head'), pg_total_relation_size('steward_audit_seal')"
        )
        heads_bytes, seals_bytes = cur.fetchone()
    return {
        "tasks": tasks,
        "audit_rows": audit,
        "db_bytes_per_task": round(db_bytes / max(tasks, 1)),
        "audit_share_of_db": round(audit_total / db_bytes, 2),
        "audit_heap_bytes_per_row": round(audit_heap / max(audit, 1)),
        "audit_row_bytes": round(float(now or 0)),
        "audit_row_bytes_before": round(float(before or 0)),
        "seal_bytes_per_task": round((heads_bytes + seals_bytes) / max(tasks, 1)),
    }


def main() -> None:
    import subprocess

    import psycopg

    reload = prepare_databases()
    os.environ.setdefault("STEWARD_LOG_LEVEL", "WARNING")
    migrate(f"{SCALE_DB}_empty")
    migrate(SCALE_DB)
    if reload:
        log(f"loading {TASKS:,} finished tasks into {SCALE_DB} (several minutes)")
        with psycopg.connect(server_url(SCALE_DB)) as conn:
            load(conn)
            conn.execute("CREATE TABLE bench_scale_load (tasks bigint, version int, migration text)")
            conn.execute("INSERT INTO bench_scale_load VALUES (%s, %s, %s)", [TASKS, LOAD_VERSION, latest_migration()])
            conn.commit()
        with psycopg.connect(server_url(SCALE_DB), autocommit=True) as conn:
            log("vacuum analyze")
            conn.execute("VACUUM (ANALYZE)")
    result: dict = {}
    for label, db in (("empty", f"{SCALE_DB}_empty"), ("loaded", SCALE_DB)):
        log(f"measuring on {label}")
        # Its own process, so Django, its connection pool and the worker all point at `db`.
        done = subprocess.run(
            [sys.executable, "-m", "tests.bench_scale", "measure", db, label],
            check=True,
            stdout=subprocess.PIPE,
            env={**os.environ, "DATABASE_URL": server_url(db)},
        )
        result.update(json.loads(done.stdout))
    print(json.dumps(result))


def measure_main(db: str, label: str) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()
    from django.conf import settings

    import tests.agents  # noqa: F401 - the bench runs the test agents

    queue = f"steward-bench-scale-{os.getpid()}"
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    figures = measure(db, loaded=label == "loaded")
    env = dict(
        os.environ,
        STEWARD_QUEUE=queue,
        STEWARD_AGENT_MODULES="console.dev.demo.agents,tests.agents",
        STEWARD_LOG_LEVEL="WARNING",
    )
    figures["dispatch_ms_p50"] = dispatch_p50(env)
    log(f"verify on {label}")
    rate, rows = verify_rate()
    figures["verify_rows_per_s"], figures["verify_rows"] = round(rate), rows
    figures.update(sizes())
    out = {label: figures}
    if label == "loaded":
        out["before"] = before_figures()
    print(json.dumps(out))


if __name__ == "__main__":
    if sys.argv[1:2] == ["measure"]:
        measure_main(*sys.argv[2:4])
    else:
        main()
