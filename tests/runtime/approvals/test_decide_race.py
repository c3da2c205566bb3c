"""A decision, or the expiry sweep, racing the task's next attempt
(docs/adr/0017-approvals.md, Consequences): the attempt reads its packages holding the
task's row lock and, finding one pending, ends `await` again. A decision that commits
meanwhile must wait for that attempt and re-queue the task it left blocked; deciding on
what its own snapshot said (`running`) would skip the re-queue and leave the task blocked
on a decision already made. The sweep skips a task an attempt holds and expires its
package at its next round; expiring it under the attempt would leave the task blocked on
a package already expired, with nothing left to wake it."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
from django.db import connection

from runtime import states
from runtime.agents import agent
from runtime.approvals.services import approval_decide, approvals_expire_due
from runtime.models import Approval, Task
from tests.conftest import database_url
from tests.harness import wait_until
from tests.runtime.inprocess import run, submit


def waiting_for_a_lock(other) -> bool:
    """Whether a backend other than `other`'s waits for a row lock (pg_stat_activity)."""
    return (
        other.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        ).fetchone()[0]
        > 0
    )


@agent("approvals.race")
def race_agent(ctx, input):
    return {"state": ctx.request_approval({"op": "race"}, effect_class="reversible", expires_in=600).state}


def test_a_decision_while_the_next_attempt_holds_the_task_waits_and_then_requeues_it(live):
    task_id = submit("approvals.race")
    run()
    approval = Approval.objects.get(task_id=task_id)
    # As if a worker held the task again (woken by another package's decision, say)...
    Task.objects.filter(id=task_id).update(status=states.RUNNING, blocked_reason=None)
    outcome = {}

    def decide():
        try:
            outcome["approval"] = approval_decide(
                approval_id=approval.id, tenant="acme", actor="user:bob", decision="approve"
            )
        finally:
            connection.close()

    with psycopg.connect(database_url(connection.settings_dict)) as attempt:
        # ...and, holding its row lock (fence_update.sql), read this package as pending and
        # ended `await` again (attempt_end.sql), not yet committed.
        attempt.execute("SELECT 1 FROM steward_task WHERE id = %s FOR UPDATE", [task_id])
        attempt.execute(
            "UPDATE steward_task SET status = 'blocked', blocked_reason = 'approval_pending' WHERE id = %s", [task_id]
        )
        decider = threading.Thread(target=decide)
        decider.start()
        wait_until(
            lambda: waiting_for_a_lock(attempt) or not decider.is_alive(),
            message="the decision to wait for the attempt's lock",
        )
        assert decider.is_alive(), "the decision did not wait for the attempt holding the task"
        attempt.commit()
    decider.join(10)
    assert outcome["approval"].state == states.APPROVED
    assert Task.objects.get(id=task_id).status == states.QUEUED
    run()
    assert Task.objects.get(id=task_id).output == {"state": states.CONSUMED}


def test_an_expiry_sweep_skips_a_task_its_next_attempt_holds_and_expires_it_at_the_next_round(live):
    task_id = submit("approvals.race")
    run()
    approval = Approval.objects.get(task_id=task_id)
    Task.objects.filter(id=task_id).update(status=states.RUNNING, blocked_reason=None)
    Approval.objects.filter(id=approval.id).update(expires_at=approval.expires_at - timedelta(days=30))

    with psycopg.connect(database_url(connection.settings_dict)) as attempt:
        # The attempt holds the task (fence_update.sql), has read the package as pending,
        # and is ending `await` again, not yet committed.
        attempt.execute("SELECT 1 FROM steward_task WHERE id = %s FOR UPDATE", [task_id])
        attempt.execute(
            "UPDATE steward_task SET status = 'blocked', blocked_reason = 'approval_pending' WHERE id = %s", [task_id]
        )
        assert approvals_expire_due(actor="test") == 0  # skipped, not waited for
        assert Approval.objects.get(id=approval.id).state == states.PENDING
        attempt.commit()

    assert approvals_expire_due(actor="test") == 1
    assert Approval.objects.get(id=approval.id).state == states.EXPIRED
    assert Task.objects.get(id=task_id).status == states.QUEUED
    run()
    assert Task.objects.get(id=task_id).output == {"state": states.EXPIRED}
