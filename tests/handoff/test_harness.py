"""The harness's own tests, on a stub runtime (tests/handoff/stub.py): threads in this
process and the fake service over loopback, no processes started.

- An honest stub passes every clause it can;
- a stub that re-sends on recovery under a fresh key is caught by one_effect_per_key;
- a stub whose late attempt writes over the cancel, and acts after it, is caught by
  cancel_not_overwritten and no_fresh_work_after_stop;
- the same seed gives the same injected order and the same verdicts; another seed
  another order.
"""

from __future__ import annotations

import pytest

from console.dev.demo.fake_service import FakeService
from tests.handoff import fixtures
from tests.handoff.harness import CLAUSES, FAIL, HOLD, ORDERS, Order, Trace, read_trace
from tests.handoff.stub import StubRuntime, StubStore

TRIALS, SETTLE, WINDOW = 3, 0.4, (0.0, 0.08)


def run(tmp_path, fixture: str, seed: int, name: str = "run", **bugs):
    runtime = StubRuntime(pause=0.03, **bugs)
    trace = Trace(tmp_path / f"{fixture}-{name}-{seed}.jsonl", fixture=fixture, runtime="stub", seed=seed, pinned={})
    with FakeService() as fake:
        if fixture == "resume_once":
            verdicts = fixtures.resume_once(runtime, StubStore(runtime), fake, trace, Order(fixture, seed))
        else:
            verdicts = fixtures.stop_for_good(
                runtime, StubStore(runtime), fake, trace, Order(fixture, seed), TRIALS, settle=SETTLE, window=WINDOW
            )
        runtime.close()
    return trace, {v.clause: v.verdict for v in verdicts}


def test_an_honest_stub_holds_every_resume_once_clause(tmp_path):
    trace, verdicts = run(tmp_path, "resume_once", 1)
    assert verdicts == dict.fromkeys(CLAUSES["resume_once"], HOLD)
    lines = read_trace(trace.path)
    assert lines[0]["kind"] == "header" and lines[0]["order"] == ORDERS["resume_once"]
    observed = [line for line in lines if line["kind"] == "observe"]
    for field in ("actor", "parent_run", "child_run", "attempt", "policy_version"):
        assert all(field in line for line in observed), field
    assert sum(1 for line in lines if line["kind"] == "verdict") == len(CLAUSES["resume_once"])


def test_a_stub_that_resends_under_a_fresh_key_on_recovery_is_caught(tmp_path):
    _, verdicts = run(tmp_path, "resume_once", 1, send_twice=True)
    assert verdicts["one_effect_per_key"] == FAIL
    assert verdicts["no_lost_slot"] == HOLD  # the break is the duplicate, nothing else


def test_an_honest_stub_holds_when_cancel_races_its_work(tmp_path):
    _, verdicts = run(tmp_path, "stop_for_good", 3)
    failed = {clause: v for clause, v in verdicts.items() if v == FAIL}
    assert failed == {}
    assert verdicts["completion_write:cancel_not_overwritten"] == HOLD


def test_a_stub_that_writes_after_cancel_is_caught(tmp_path):
    _, verdicts = run(tmp_path, "stop_for_good", 3, write_after_cancel=True)
    assert verdicts["completion_write:cancel_not_overwritten"] == FAIL
    assert verdicts["completion_write:no_fresh_work_after_stop"] == FAIL


@pytest.mark.parametrize("fixture", ["resume_once", "stop_for_good"])
def test_the_same_seed_gives_the_same_injected_order_and_verdicts(tmp_path, fixture):
    first, first_verdicts = run(tmp_path, fixture, 7, "a")
    second, second_verdicts = run(tmp_path, fixture, 7, "b")
    assert first.injected() == second.injected()
    assert first_verdicts == second_verdicts
    if fixture == "stop_for_good":  # the seed draws the offsets: another seed, another order
        other, _ = run(tmp_path, fixture, 8, "c")
        assert other.injected() != first.injected()


def test_the_published_traces_injected_order_is_the_one_their_seed_draws():
    """docs/handoff/traces: every race offset a published stop-for-good trace injected is
    the one harness.Order draws again from the trace's seed, in the same order."""
    import json
    from pathlib import Path

    from tests.handoff.harness import RACES, REPO

    traces = sorted((REPO / "docs" / "handoff" / "traces").glob("stop_for_good-*.jsonl"))
    assert traces, "no published traces"
    for path in traces:
        lines = read_trace(Path(path))
        header = lines[0]
        races = [line["params"] for line in lines if line["kind"] == "inject" and line["step"] == "race"]
        trials = len(races) // len(RACES)
        again = Order("stop_for_good", header["seed"])
        expected = [
            {"race": race, "trial": trial, "offset": again.offset(0.0, 0.4)}
            for race in RACES
            for trial in range(trials)
        ]
        assert json.dumps(races, sort_keys=True) == json.dumps(expected, sort_keys=True), path.name
