"""The three fixtures against DBOS Transact on PostgreSQL (tests/handoff/dbos_app.py)."""

from __future__ import annotations

import pytest

from console.dev.demo.fake_service import FakeService
from tests.handoff.conftest import record
from tests.handoff.dbos_adapter import DbosAdapter, DbosStore
from tests.handoff.fixtures import resume_once, stop_for_good
from tests.handoff.harness import FAIL, Order, Trace

pytestmark = [pytest.mark.process, pytest.mark.handoff]


@pytest.fixture
def dbos(dbos_url, child_env):
    adapter = DbosAdapter(dbos_url, child_env)
    yield adapter
    adapter.close()


def test_resume_once(dbos, dbos_url, handoff_out, seed):
    trace = Trace(handoff_out / f"resume_once-dbos-{seed}.jsonl", fixture="resume_once", runtime="dbos", seed=seed)
    with FakeService() as fake:
        verdicts = resume_once(dbos, DbosStore(dbos_url), fake, trace, Order("resume_once", seed))
    record(handoff_out, verdicts, trace)
    assert {v.clause: v.verdict for v in verdicts}["one_effect_per_key"] != FAIL, verdicts


def test_stop_for_good(dbos, dbos_url, handoff_out, seed, trials):
    trace = Trace(handoff_out / f"stop_for_good-dbos-{seed}.jsonl", fixture="stop_for_good", runtime="dbos", seed=seed)
    with FakeService() as fake:
        verdicts = stop_for_good(dbos, DbosStore(dbos_url), fake, trace, Order("stop_for_good", seed), trials)
    record(handoff_out, verdicts, trace)
    assert len(verdicts) > 5
