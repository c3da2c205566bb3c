"""A worker ending a stopped attempt by force (runtime/worker/stop_watch.py), and the
sweep releasing one whose worker vanished (runtime/worker/supervisor.py), lock the
task's rows before they end the attempt, the order a stop and the sweep take them in.

Ending the attempt appends to the task's audit chain (an advisory lock, ADR 0004); a
transaction that holds the task's row and then appends to the same chain (the sweep
settling a stop at its bound, a second stop) would deadlock with a worker that took the
chain first and then waited for the row. PostgreSQL then aborted the worker's release
and the worker exited without its acknowledgment: CI's browser journey read "lease
lapsed" where "by force" was due (2026-12-02)."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from runtime import states
from runtime.attempts import interrupts
from runtime.audit import audit_append
from runtime.models import Attempt, StopAck, Task
from runtime.stops.services import lock_chain, task_stop
from runtime.worker import supervisor
from runtime.worker.stop_watch import StopWatch
from tests.harness import wait_until
from tests.runtime.stops.test_summary import running

pytestmark = pytest.mark.django_db(transaction=True)

TRIALS = 5


def waiting_on_a_lock() -> bool:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cur.fetchone()[0] > 0


def forced(task: Task) -> tuple:
    """The worker's stop watcher ends the attempt by force."""
    run = interrupts.Running(task_id=task.id, epoch=task.epoch, thread=threading.get_ident())
    StopWatch()._force(run, after=5.0)
    return ("by force", run.forced)


def lapsed(task: Task) -> tuple:
    """The sweep releases the attempt of a worker that vanished (its lease lapsed)."""
    report = supervisor.SweepReport()
    supervisor._release_abandoned(report, actor="supervisor:test")
    return ("lease lapsed", report.released == 1)


@pytest.mark.parametrize("release", [forced, lapsed], ids=["worker's forced release", "sweep's release"])
def test_a_release_with_an_acknowledgment_waits_for_the_task_row_before_it_touches_the_audit_chain(release, caplog):
    caplog.set_level(logging.INFO, logger="runtime.worker.stop_watch")
    outcomes = {"acknowledged": 0, "retried": 0, "other side failed": 0}
    for _ in range(TRIALS):
        task = running(n=1)
        task_stop(task_id=task.id, actor="user:alice", reason="runaway")
        Attempt.objects.filter(task_id=task.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        task = Task.objects.get(id=task.id)
        held, go = threading.Event(), threading.Event()
        failures, results = [], []

        def sweep_like():
            """Hold the task's row, then append to its chain once the release waits."""
            try:
                with transaction.atomic(durable=True):
                    lock_chain(task.id)
                    held.set()
                    go.wait(30)
                    audit_append(
                        actor="supervisor:test", tenant=task.tenant, task_id=task.id, kind="stop.bound_checked", data={}
                    )
            except Exception as exc:
                failures.append(exc)
            finally:
                connection.close()

        def releasing():
            try:
                results.append(release(task))
            except Exception as exc:
                failures.append(exc)
            finally:
                connection.close()

        caplog.clear()
        other = threading.Thread(target=sweep_like)
        other.start()
        assert held.wait(30)
        releaser = threading.Thread(target=releasing)
        releaser.start()
        wait_until(waiting_on_a_lock, timeout=30, message="the release to wait for the task's row")
        go.set()
        other.join(30)
        releaser.join(30)
        assert not other.is_alive() and not releaser.is_alive()

        ack = StopAck.objects.filter(task_id=task.id, boundary=states.WORKER).first()
        if results and results[0][1] and ack is not None and ack.detail.get("ended") == results[0][0]:
            outcomes["acknowledged"] += 1
        if any("trying again" in r.getMessage() for r in caplog.records):
            outcomes["retried"] += 1
        if failures:
            outcomes["other side failed"] += 1
    assert outcomes == {"acknowledged": TRIALS, "retried": 0, "other side failed": 0}
