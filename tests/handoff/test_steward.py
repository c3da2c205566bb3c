"""The three fixtures against Steward: real Celery workers and supervisors (tests/harness.py)."""

from __future__ import annotations

import pytest

from tests.console.gateway.conftest import fake_model, gateway_web, model  # noqa: F401 - fixtures
from tests.handoff.conftest import record
from tests.handoff.fixtures import delegate_less, resume_once, stop_for_good
from tests.handoff.harness import FAIL, Order, Trace
from tests.handoff.steward_adapter import StewardAdapter, StewardStore

pytestmark = [pytest.mark.integration, pytest.mark.handoff]


def test_resume_once(live, fleet, fake, handoff_out, seed):
    trace = Trace(
        handoff_out / f"resume_once-steward-{seed}.jsonl", fixture="resume_once", runtime="steward", seed=seed
    )
    verdicts = resume_once(StewardAdapter(fleet), StewardStore(), fake, trace, Order("resume_once", seed))
    record(handoff_out, verdicts, trace)
    assert [v for v in verdicts if v.verdict == FAIL] == []


def test_stop_for_good(live, fleet, fake, handoff_out, seed, trials):
    trace = Trace(
        handoff_out / f"stop_for_good-steward-{seed}.jsonl", fixture="stop_for_good", runtime="steward", seed=seed
    )
    verdicts = stop_for_good(StewardAdapter(fleet), StewardStore(), fake, trace, Order("stop_for_good", seed), trials)
    record(handoff_out, verdicts, trace)
    assert [v for v in verdicts if v.verdict == FAIL] == []


def test_delegate_less(live, fleet, fake, gateway_web, model, handoff_out, seed):  # noqa: F811 - fixtures
    adapter = StewardAdapter(fleet)
    adapter.gateway = (gateway_web, model)
    trace = Trace(
        handoff_out / f"delegate_less-steward-{seed}.jsonl", fixture="delegate_less", runtime="steward", seed=seed
    )
    verdicts = delegate_less(adapter, StewardStore(), fake, trace, Order("delegate_less", seed))
    record(handoff_out, verdicts, trace)
    assert [v for v in verdicts if v.verdict == FAIL] == []
