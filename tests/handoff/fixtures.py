"""The three fixtures, runtime-neutral: each drives an adapter through its published order
(harness.ORDERS), then judges from the fake service's records and the store reader.

A fixture returns its verdicts; its trace file holds them too. Beyond the `Adapter`
protocol a fixture asks the adapter only for: `queue_bound` (the configured waiting bound,
None where the runtime has none), `configure_queue`, `submit` (raises `Refused` when the
runtime refuses), `workers`, `supervisor_restart` and `new_attempt`.
"""

from __future__ import annotations

import threading
import time

from tests.handoff.harness import CLAUSES, FAIL, HOLD, NA, NOT_RUN, RACES, Order, Trace, judge, one_effect_per_key

TERMINAL = {"completed", "failed", "cancelled", "blocked"}


class Refused(Exception):
    """The runtime refused a submission (its queue bound)."""


def wait_for(predicate, timeout: float, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def run_of(call: dict) -> str | None:
    body = call.get("body") or {}
    return str(body.get("run") or body.get("task") or body.get("workflow") or "") or None


# --- 1. Resume once -----------------------------------------------------------------------


def resume_once(adapter, store, fake, trace: Trace, order: Order) -> list:
    fx, rt = "resume_once", adapter.name
    trace.inject("configure_queue", running=1, waiting=1)
    adapter.configure_queue(running=1, waiting=1)
    adapter.workers(2)
    fake.push("hang")
    trace.inject("start", run="A", action="keyed call; the service performs it and holds the reply")
    a = adapter.submit("act", {"url": fake.url, "name": "A"})
    if not fake.wait_for_hung(1, timeout=60):
        raise AssertionError("the service never received A's call")
    (first,) = fake.calls()
    trace.observe("service performed", source="fake_service", run=a, key=first["key"], worker=first["worker"])
    trace.inject("cut", run="A", point="after_call", how="kill")
    adapter.cut(a, "after_call", "kill")
    trace.inject("submit", run="B")
    b = adapter.submit("act", {"url": fake.url, "name": "B"})
    trace.inject("submit", run="C", beyond_bound=True)
    try:
        c = adapter.submit("act", {"url": fake.url, "name": "C"})
    except Refused as exc:
        c = None
        trace.observe("submission refused", source="adapter", detail=str(exc))
    waiting = store.waiting()
    trace.inject("recover", supervisors=2)
    adapter.replace(supervisors=2)
    runs = [r for r in (a, b, c) if r]
    ended = wait_for(lambda: all(store.status(r) in TERMINAL for r in runs), timeout=90)
    trace.inject("release held reply")
    fake.release()
    wait_for(lambda: fake.active == 0, timeout=10)
    time.sleep(0.5)
    calls = fake.calls()
    for r in runs:
        for att in store.attempts(r):
            trace.observe("attempt", source="store", child_run=r, attempt=att.get("attempt"), state=att)
    keys = {c["key"] for c in calls}
    per_run = {r: sum(1 for c in calls if run_of(c) == r and c["outcome"] == "performed") for r in runs}
    outcome = one_effect_per_key(calls, keys)
    if outcome[0] == HOLD and any(n != 1 for n in per_run.values()):
        outcome = (FAIL, f"a run's action was not performed exactly once: {per_run}", outcome[2])
    out = [judge(trace, fx, "one_effect_per_key", rt, (outcome[0], outcome[1], {**outcome[2], "per_run": per_run}))]
    statuses = {r: store.status(r) for r in runs}
    wait_for(lambda: store.slots_held() == 0, timeout=10)  # a slot comes back just after the status
    held = store.slots_held()
    lost = (not ended) or held or any(statuses[r] != "completed" for r in runs if r != a)
    out.append(
        judge(
            trace,
            fx,
            "no_lost_slot",
            rt,
            (
                FAIL if lost else HOLD,
                "the waiting work ran after recovery and no slot is held"
                if not lost
                else f"slots held {held} or waiting work did not run: {statuses}",
                {"statuses": statuses, "slots_held": held},
            ),
        )
    )
    if adapter.queue_bound is None:
        bound = (NA, adapter.no_bound_reason, {"waiting_after_C": waiting, "C_admitted": c is not None})
    elif c is None and waiting <= adapter.queue_bound:
        bound = (HOLD, f"C refused; {waiting} waiting <= bound {adapter.queue_bound}", {"waiting": waiting})
    else:
        bound = (FAIL, f"{waiting} waiting against a bound of {adapter.queue_bound}", {"waiting": waiting})
    out.append(judge(trace, fx, "queue_bound_held", rt, bound))
    workers = sorted({c["worker"] for c in calls if c["key"] == first["key"]})
    out.append(
        judge(
            trace,
            fx,
            "active_requests_recorded",
            rt,
            (
                HOLD,
                f"peak {fake.peak_active} requests active at once, across {len(workers)} processes for A's key",
                {"peak_active": fake.peak_active, "processes_for_A": workers, "calls": len(calls)},
            ),
        )
    )
    return out


# --- 3. Stop for good ---------------------------------------------------------------------

KIND = {
    "child_spawn": "spawn",
    "completion_write": "paced",
    "reused_id": "paced",
    "supervisor_restart": "paced",
    "timer": "timer",
}


def stop_for_good(
    adapter, store, fake, trace: Trace, order: Order, trials: int, settle: float = 1.0, window: tuple = (0.0, 0.4)
) -> list:
    fx, rt = "stop_for_good", adapter.name
    adapter.workers(2)
    adapter.replace(supervisors=2)
    out = []
    started_apart = {"started_before_stop": 0, "answered_after_stop": 0}
    last_cancelled, last_name = None, None
    for race in RACES:
        overwritten, fresh, accepted = [], [], 0
        for trial in range(trials):
            offset = order.offset(*window)
            trace.inject("race", race=race, trial=trial, offset=offset)
            run = adapter.submit(KIND[race], {"url": fake.url, "name": f"{race}-{trial}"})
            trace.observe("started", source="adapter", child_run=run, name=f"{race}-{trial}")
            wait_for(lambda run=run: store.status(run) in {"running", "sleeping", "waiting"}, timeout=30)
            time.sleep(offset)
            restart = None
            if race == "supervisor_restart":
                restart = threading.Thread(target=adapter.supervisor_restart)
                restart.start()
            adapter.cancel(run)
            stop_at = time.time()
            if restart:
                restart.join(60)
            at_stop = store.status(run)
            before = {c["key"] for c in fake.calls() if c["at"] <= stop_at}
            if race == "reused_id":
                trace.inject("resubmit same id", run=f"{race}-{trial}")
                adapter.resubmit(run)
            # Let everything that could still move, move: the old attempt's steps, timers.
            time.sleep(settle)
            wait_for(lambda: fake.active == 0, timeout=20)
            wait_for(lambda run=run: store.status(run) != "stopping", timeout=20)
            final = store.status(run)
            tree = [run, *store.descendants(run)]
            trace.observe(
                "after stop", source="store", child_run=run, status_at_stop=at_stop, final=final, tree=len(tree)
            )
            if at_stop == "cancelled" or store.cancel_recorded(run):
                accepted += 1
                last_cancelled, last_name = run, f"{race}-{trial}"
                if final != "cancelled":
                    overwritten.append({"trial": trial, "run": run, "final": final})
            calls = [c for c in fake.calls() if run_of(c) in set(tree)]
            started_apart["started_before_stop"] += sum(1 for c in calls if c["key"] in before)
            late = [c for c in calls if c["at"] > stop_at and c["key"] not in before and c["outcome"] == "performed"]
            live_children = store.children_created_after(run, stop_at)
            if late or live_children:
                fresh.append({"trial": trial, "late_calls": [c["key"] for c in late], "children": live_children})
        ev = {"trials": trials, "cancel_accepted": accepted}
        out.append(
            judge(
                trace,
                fx,
                f"{race}:cancel_not_overwritten",
                rt,
                (FAIL, f"cancellation overwritten: {overwritten[:3]}", {**ev, "overwritten": len(overwritten)})
                if overwritten
                else (HOLD, f"{accepted} of {trials} cancels took; none overwritten", ev)
                if accepted
                else (NOT_RUN, "no cancel took effect before the run ended", ev),
            )
        )
        out.append(
            judge(
                trace,
                fx,
                f"{race}:no_fresh_work_after_stop",
                rt,
                (FAIL, f"fresh work after the stop: {fresh[:3]}", {**ev, "trials_with_fresh": len(fresh)})
                if fresh
                else (HOLD, "no new key performed and no live child admitted after the cancel returned", ev),
            )
        )
    out.append(
        judge(
            trace,
            fx,
            "started_effects_recorded_apart",
            rt,
            (HOLD, "calls under keys started before the stop are counted apart (service records)", started_apart),
        )
    )
    if last_cancelled is None:
        out.append(judge(trace, fx, "new_attempt_distinguishable", rt, (NOT_RUN, "no cancelled run", {})))
    else:
        trace.inject("deliberate new attempt", run=last_name)
        adapter.new_attempt(last_cancelled)
        marker = wait_for(lambda: store.new_attempt_marker(last_cancelled), timeout=30)
        out.append(
            judge(
                trace,
                fx,
                "new_attempt_distinguishable",
                rt,
                (HOLD, f"the store records the new attempt as such: {marker}", {"marker": marker})
                if marker
                else (FAIL, "the store holds nothing that tells the new attempt from a resurrection", {}),
            )
        )
    acks = store.acknowledgments(last_cancelled) if last_cancelled else None
    out.append(
        judge(
            trace,
            fx,
            "acknowledgments",
            rt,
            (NA, store.no_acks_reason, {})
            if acks is None
            else (HOLD if acks else FAIL, f"acknowledged by: {acks}", {"acks": acks}),
        )
    )
    return out


def not_run(trace: Trace, fixture: str, runtime: str, reason: str, done: list) -> list:
    """Every clause a fixture did not reach, reported as such (never silently missing)."""
    seen = {v.clause for v in done}
    return done + [
        judge(trace, fixture, clause, runtime, (NOT_RUN, reason, {}))
        for clause in CLAUSES[fixture]
        if clause not in seen
    ]
