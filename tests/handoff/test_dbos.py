"""The three fixtures against DBOS Transact on PostgreSQL (tests/handoff/dbos_app.py)."""

from __future__ import annotations

import pytest

from console.dev.demo.fake_service import FakeService
from tests.handoff.conftest import record
from tests.handoff.dbos_adapter import DbosAdapter, DbosStore
from tests.handoff.fixtures import resume_once, stop_for_good
from tests.handoff.harness import FAIL, NA, NOT_RUN, Order, Trace, judge

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


# DBOS has no authority model of its own: no grants, no capability tokens, no gateway.
# The careful-user pattern (keep provider keys in a gateway outside the workflow, and
# re-read current authority in a step before each action) is the application's own code,
# not DBOS's; this slice does not build it, and says so cell by cell.
DELEGATE_LESS = {
    "old_action_denied_by_current_authority": (
        NOT_RUN,
        "DBOS has no grant re-check; the careful-user form (a step that re-reads grants before the "
        "action) is not built yet",
    ),
    "old_token_replay_refused": (NA, "DBOS issues no capability tokens and has no credential gateway"),
    "streaming_judged_apart": (NA, "DBOS has no gateway to cut a stream; a running step runs to its end"),
    "attribution_not_from_content": (
        NOT_RUN,
        "DBOS records authenticated_user set by the caller's context; not yet exercised with forged content",
    ),
    "names_enforcing_boundary": (NA, "DBOS records no authorization decisions or boundaries"),
    "hostile_text_no_authorization": (NA, "DBOS holds no authorization records for text to become"),
}


def test_delegate_less_is_reported_not_applicable_where_dbos_has_no_boundary(handoff_out, seed):
    trace = Trace(handoff_out / f"delegate_less-dbos-{seed}.jsonl", fixture="delegate_less", runtime="dbos", seed=seed)
    verdicts = [
        judge(trace, "delegate_less", clause, "dbos", (verdict, reason, {}))
        for clause, (verdict, reason) in DELEGATE_LESS.items()
    ]
    record(handoff_out, verdicts, trace)
    assert len(verdicts) == 6
