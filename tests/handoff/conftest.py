"""Fixtures of the handoff suite (docs/handoff.md). HANDOFF_OUT names where traces and
verdicts go (`make handoff`: docs/handoff/traces); without it, a temporary folder.
HANDOFF_TRIALS (20 by default in `make handoff`, 200 in `make handoff-stress`, 3 in
`make test`'s fast form) and HANDOFF_SEED set the race trials and the seed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.db import connection

from tests.conftest import database_url


@pytest.fixture(scope="session")
def handoff_out(tmp_path_factory) -> Path:
    out = os.environ.get("HANDOFF_OUT")
    path = Path(out) if out else tmp_path_factory.mktemp("handoff")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def seed() -> int:
    return int(os.environ.get("HANDOFF_SEED", "24"))


@pytest.fixture(scope="session")
def trials() -> int:
    return int(os.environ.get("HANDOFF_TRIALS", "3"))


@pytest.fixture
def dbos_url(live):
    """A fresh database for DBOS's system tables, beside the test database, made by the
    session's role (the server's superuser under `make test`)."""
    from tests.handoff.dbos_adapter import drop_database, fresh_database

    admin = database_url({**connection.settings_dict, "NAME": "postgres"})
    name = f"handoff_dbos_{os.getpid()}"
    yield fresh_database(admin, name)
    drop_database(admin, name)  # after the adapter's processes are gone (it is torn down first)


def record(handoff_out: Path, verdicts, trace) -> None:
    """Append verdicts to verdicts.jsonl, which tests/handoff/results.py turns into the table."""
    with (handoff_out / "verdicts.jsonl").open("a") as out:
        for v in verdicts:
            line = {**v.__dict__, "trace": trace.path.name, "seed": trace.seed}
            out.write(json.dumps(line, sort_keys=True, default=str) + "\n")
