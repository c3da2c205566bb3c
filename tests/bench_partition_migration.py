"""Migration 0032 (the high-volume tables partitioned) on a database holding a million
finished tasks, as an upgrade meets it (issue 25: "the migration from today's tables is
tested on a database holding 1M tasks"). One JSON object on stdout; progress on stderr.

    1. a fresh database (STEWARD_BENCH_PARTITION_DB, default steward_partition_migration)
       migrated to 0029, the last migration before partitioning;
    2. tests/bench_scale.py's load: STEWARD_BENCH_PARTITION_TASKS (default 1,000,000)
       finished tasks, their attempts, 5 journal rows each, effects, and 10 hash-chained
       audit rows each;
    3. `migrate runtime 0032_partitions`, timed (migrate_s);
    4. the same row counts after as before in every table it touched, each old table
       now its parent's `_legacy` partition, `audit verify` over the whole trail (chains
       and seals) passing, and a new audit row landing in today's partition.

Run with the test services: `.venv/bin/python -m console.dev.services run --tests --
.venv/bin/python -m tests.bench_partition_migration` (it takes minutes and ~8 GB), or
through tests/integration/test_partition_migration.py (marked stress).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import tests.bench_role  # noqa: F401 - before anything reads DATABASE_URL

DB = os.environ.get("STEWARD_BENCH_PARTITION_DB", "steward_partition_migration")
TASKS = int(os.environ.get("STEWARD_BENCH_PARTITION_TASKS", "1000000"))
TABLES = ("steward_audit", "steward_step", "steward_decision", "steward_gateway_call", "steward_task")


def log(message: str) -> None:
    print(f"bench-partition-migration: {message}", file=sys.stderr, flush=True)


def manage(*args: str, url: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "DATABASE_URL": url, "STEWARD_LOG_LEVEL": "WARNING"},
    )


def counts(conn) -> dict:
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def main() -> dict:
    import psycopg

    from tests import bench_scale

    url = bench_scale.server_url(DB)
    with psycopg.connect(bench_scale.server_url("postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    manage("migrate", "runtime", "0029_agent_versions", "-v0", url=url)
    log(f"loading {TASKS:,} finished tasks (minutes)")
    started = time.monotonic()
    with psycopg.connect(url) as conn:
        bench_scale.load(conn, db=DB, tasks=TASKS)
        conn.commit()
    load_s = time.monotonic() - started
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
        before = counts(conn)
        size_before = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    log(f"loaded in {load_s:.0f} s: {before}")

    started = time.monotonic()
    manage("migrate", "runtime", "0032_partitions", "-v0", url=url)
    migrate_s = time.monotonic() - started
    log(f"migrated in {migrate_s:.1f} s")

    with psycopg.connect(url, autocommit=True) as conn:
        after = counts(conn)
        legacy = {
            t: conn.execute("SELECT count(*) FROM " + t + "_legacy").fetchone()[0]
            for t in TABLES
            if t != "steward_task"
        }
        partitioned = [
            name
            for (name,) in conn.execute(
                "SELECT relname FROM pg_class WHERE relkind = 'p' AND relname = ANY(%s) ORDER BY 1", [list(TABLES)]
            )
        ]
        size_after = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        conn.execute(
            "INSERT INTO steward_audit (actor, tenant, kind, data) VALUES ('bench', 'acme', 'pool.created', '{}')"
        )
        landed = conn.execute("SELECT tableoid::regclass::text FROM steward_audit ORDER BY id DESC LIMIT 1").fetchone()[
            0
        ]
    started = time.monotonic()
    verify = subprocess.run(
        [sys.executable, "manage.py", "steward", "audit", "verify"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "DATABASE_URL": url, "STEWARD_LOG_LEVEL": "WARNING"},
    )
    verify_s = time.monotonic() - started
    result = {
        "partition_migration_tasks": TASKS,
        "partition_migration_load_s": round(load_s, 1),
        "partition_migration_s": round(migrate_s, 1),
        "partition_migration_rows_kept": before == after and all(legacy[t] == before[t] for t in legacy),
        "partition_migration_rows": before,
        "partition_migration_partitioned": partitioned,
        "partition_migration_new_row_in": landed,
        "partition_migration_db_mb_before": round(size_before / 2**20),
        "partition_migration_db_mb_after": round(size_after / 2**20),
        "partition_migration_verify_ok": verify.returncode == 0,
        "partition_migration_verify_s": round(verify_s, 1),
        "partition_migration_verify": verify.stdout.strip()[-200:],
    }
    with psycopg.connect(bench_scale.server_url("postgres"), autocommit=True) as conn:
        if not os.environ.get("STEWARD_BENCH_PARTITION_KEEP"):
            conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
