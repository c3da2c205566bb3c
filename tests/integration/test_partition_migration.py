"""Migration 0032 on a database holding a million finished tasks (issue 25): every row
kept, each old table its parent's legacy partition, the whole trail still verifying, and
new rows landing in the day's partitions. Minutes and about 8 GB: the stress tier only
(`make stress`); tests/bench_partition_migration.py does the work and its docstring says
how to run it alone. STEWARD_BENCH_PARTITION_TASKS makes it smaller."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.stress, pytest.mark.process]

REPO = Path(__file__).resolve().parents[2]


def test_migrating_a_million_tasks_keeps_every_row_and_the_trail_verifies():
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench_partition_migration"],
        cwd=REPO,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    figures = json.loads(done.stdout)

    assert figures["partition_migration_rows_kept"], figures
    assert figures["partition_migration_rows"]["steward_task"] == figures["partition_migration_tasks"]
    assert figures["partition_migration_partitioned"] == sorted(
        ["steward_audit", "steward_decision", "steward_gateway_call", "steward_step"]
    )
    assert figures["partition_migration_verify_ok"], figures["partition_migration_verify"]
    assert figures["partition_migration_new_row_in"].startswith("steward_audit_p"), figures
