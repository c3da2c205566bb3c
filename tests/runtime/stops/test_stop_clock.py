"""A stop's times come from one clock: its transactions' time, now(). Issue 20 found a
stop summary whose `finished_at` (...09.986) was earlier than its `requested_at`
(...09.989): the request took the statement's time (Django's Now()) and the cancel the
transaction's, and a stop whose tasks were all idle settled in the very transaction
that requested it, a few milliseconds after that transaction began.

Each trial commits its own transactions (`live`), as the console's stop does."""

from __future__ import annotations

from collections import Counter

import pytest

from runtime.models import Stop, StopAck
from runtime.stops.services import agent_stop, task_stop
from tests.runtime.authz.common import child
from tests.runtime.test_stops import claim, submit, worker_answers

TRIALS = [pytest.param(50, id="50-trials"), pytest.param(300, id="300-trials", marks=pytest.mark.stress)]


def _order(stop_id) -> dict:
    stop = Stop.objects.get(id=stop_id)
    acks = list(StopAck.objects.filter(stop_id=stop_id).values_list("at", flat=True))
    assert stop.finished_at is not None, "the stop is over"
    return {
        "finished_before_requested": stop.finished_at < stop.requested_at,
        "ack_before_requested": any(at < stop.requested_at for at in acks),
    }


@pytest.mark.parametrize("trials", TRIALS)
def test_an_idle_tree_stopped_at_once_is_never_finished_before_it_was_requested(live, trials):
    outcomes = Counter()
    for _ in range(trials):
        root = submit("t.spawner", {"children": []})
        for seq in (1, 2):
            child(root, spawn_seq=seq)
        started = task_stop(task_id=root, actor="user:alice", reason="clock")
        assert len(started.cancelled) == 3  # all idle: settled in the request's own transaction
        outcomes.update(k for k, v in _order(started.stop_id).items() if v)
        outcomes["trials"] += 1
    print(dict(outcomes))
    assert outcomes == Counter(trials=trials)


@pytest.mark.parametrize("trials", TRIALS)
def test_a_running_task_acknowledged_later_is_never_finished_before_it_was_requested(live, trials):
    outcomes = Counter()
    for _ in range(trials):
        task_id = submit()
        got = claim(task_id)
        started = task_stop(task_id=task_id, actor="user:alice", reason="clock")
        assert started.stopping == [task_id]
        assert worker_answers(got) == "refused"  # the worker's acknowledgment, in its own transaction
        outcomes.update(k for k, v in _order(started.stop_id).items() if v)
        outcomes["trials"] += 1
    print(dict(outcomes))
    assert outcomes == Counter(trials=trials)


def test_a_kill_switch_with_nothing_live_is_over_the_instant_it_is_requested(live):
    started = agent_stop(tenant="acme", agent="t.steps", actor="user:alice", reason="nothing runs")
    stop = Stop.objects.get(id=started.stop_id)
    assert stop.finished_at == stop.requested_at
