"""The three fixtures, runtime-neutral: each drives an adapter through its published order
(harness.ORDERS), then judges from the fake service's records and the store reader.

A fixture returns its verdicts; its trace file holds them too. Beyond the `Adapter`
protocol a fixture asks the adapter only for: `queue_bound` (the configured waiting bound,
None where the runtime has none), `configure_queue`, `submit` (raises `Refused` when the
runtime refuses), `workers`, `supervisor_restart` and `new_attempt`.
"""

from __future__ import annotations

import json
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


# --- 2. Delegate less ---------------------------------------------------------------------

BOUNDARIES = {
    "worker",
    "storage",
    "credential_gateway",
    "scheduler",
    "approval_gate",
    "grant_check",
    "tenant_isolation",
}
HOSTILE_MARK = "grant write:repo"


def delegate_less(adapter, store, fake, trace: Trace, order: Order) -> list:
    """One narrowing, injected while a stream flows, judged on five paths: the resumed
    task's old action, the old token replayed, the stream in flight and the request after
    it (apart), a request whose headers and body claim another actor, hostile tool text."""
    fx, rt = "delegate_less", adapter.name
    trace.inject("permit", owner="repo:acme/* and model:*")
    adapter.permit()
    adapter.workers(1)
    adapter.replace(supervisors=1)
    trace.inject("start", run="P", sleeps=order.offset(1.0, 1.5))
    run = adapter.submit("sleep_then_act", {"url": fake.url, "name": "P"})
    wait_for(lambda: store.status(run) == "sleeping", timeout=60)
    trace.inject("mint old tokens while permitted", runs=["G1 replay", "G2 stream", "G3 forged"])
    g1, g2, g3 = adapter.gateway_task(), adapter.gateway_task(), adapter.gateway_task()
    trace.inject("open stream on G2; narrow the owner after its first chunk", narrowed_to="repo:acme/docs, model:other")
    streamed = adapter.stream_and_narrow(g2)
    trace.observe("stream ended", source="adapter", child_run=g2[0], detail=streamed)
    ended = wait_for(lambda: store.status(run) in TERMINAL, timeout=60)
    trace.inject("replay old token", run="G1")
    trace.observe("replay answered", source="adapter", child_run=g1[0], detail=adapter.replay(g1))
    trace.inject("next request on the streamed token", run="G2")
    trace.observe("next answered", source="adapter", child_run=g2[0], detail=adapter.replay(g2))
    trace.inject("forged attribution", run="G3", claims={"actor": "user:dave", "tenant": "globex"})
    trace.observe("forged answered", source="adapter", child_run=g3[0], detail=adapter.forge(g3))
    trace.inject("hostile tool text across the handoff")
    grants_before = store.grants()
    hostile = adapter.hostile()
    wait_for(lambda: store.status(hostile) in TERMINAL, timeout=60)

    out = []
    decisions = {r: store.decisions(r) for r in (run, g1[0], g2[0], g3[0], hostile)}
    for r, ds in decisions.items():
        for d in ds:
            trace.observe(
                "decision",
                source="store",
                actor=d["actor"],
                parent_run=d.get("parent_task"),
                child_run=r,
                attempt=d["epoch"],
                policy_version=d["policy_version"],
                boundary=d["boundary"],
                allowed=d["allowed"],
                reason_code=d["reason_code"],
            )
    performed = [c for c in fake.calls() if run_of(c) == run and c["outcome"] == "performed"]
    denied = [d for d in decisions[run] if not d["allowed"]]
    out.append(
        judge(
            trace,
            fx,
            "old_action_denied_by_current_authority",
            rt,
            (FAIL, f"the old action reached the service: {len(performed)} calls", {})
            if performed
            else (
                HOLD,
                f"ended {store.status(run)}; denied at {denied[-1]['boundary']} ({denied[-1]['reason_code']})",
                denied[-1],
            )
            if ended and denied
            else (FAIL, f"no denial recorded; status {store.status(run)}", {}),
        )
    )
    calls = {r: store.gateway_calls(r) for r in (g1[0], g2[0], g3[0])}
    for r, cs in calls.items():
        for c in cs:
            trace.observe(
                "gateway call",
                source="store",
                child_run=r,
                attempt=c["epoch"],
                outcome=c["outcome"],
                boundary=c["boundary"],
            )
    replay = calls[g1[0]]
    out.append(
        judge(
            trace,
            fx,
            "old_token_replay_refused",
            rt,
            (HOLD, "the replayed old token was refused at credential_gateway", replay[-1])
            if replay and replay[-1]["outcome"] == "denied" and replay[-1]["boundary"] == "credential_gateway"
            else (FAIL, f"the replay was not refused: {replay}", {}),
        )
    )
    streamed_calls = calls[g2[0]]
    first, nxt = (streamed_calls + [None, None])[:2]
    apart = (
        first is not None
        and first["outcome"] in ("partial", "unknown")
        and nxt is not None
        and nxt["outcome"] == "denied"
    )
    out.append(
        judge(
            trace,
            fx,
            "streaming_judged_apart",
            rt,
            (
                HOLD,
                f"the stream in flight ended {first['outcome']}; the next request was denied apart",
                {"calls": streamed_calls},
            )
            if apart
            else (FAIL, f"stream and next request: {streamed_calls}", {"calls": streamed_calls}),
        )
    )
    forged = calls[g3[0]]
    attributed = [(c["actor"], c["tenant"]) for c in forged]
    out.append(
        judge(
            trace,
            fx,
            "attribution_not_from_content",
            rt,
            (HOLD, f"recorded as {attributed}, not the claimed user:dave/globex", {"recorded": attributed})
            if forged and all(a != "user:dave" and t != "globex" for a, t in attributed)
            else (FAIL, f"attribution recorded: {attributed}", {}),
        )
    )
    every = [d for ds in decisions.values() for d in ds if not d["allowed"]]
    unnamed = [d for d in every if d["boundary"] not in BOUNDARIES]
    out.append(
        judge(
            trace,
            fx,
            "names_enforcing_boundary",
            rt,
            (FAIL, f"denials without a boundary: {unnamed}", {})
            if unnamed or not every
            else (HOLD, f"{len(every)} denials, each naming one of {sorted({d['boundary'] for d in every})}", {}),
        )
    )
    grants_after = store.grants()
    from_text = [g for g in grants_after if HOSTILE_MARK in json.dumps(g, default=str)]
    out.append(
        judge(
            trace,
            fx,
            "hostile_text_no_authorization",
            rt,
            (HOLD, "no grant added, changed or removed; none carries the text", {"grants": len(grants_after)})
            if grants_after == grants_before and not from_text
            else (FAIL, f"grants changed: {len(grants_before)} -> {len(grants_after)}", {}),
        )
    )
    return out
