"""A decision racing the task's next attempt (docs/adr/0017-approvals.md, Consequences):
the attempt reads its packages holding the task's row lock and, finding one pending,
ends `await` again. A decision that commits meanwhile must wait for that attempt and
re-queue the task it left blocked; deciding on what its own snapshot said (`running`)
would skip the re-queue and leave the task blocked on a decision already made."""

from __future__ import annotations

import threading
import time

import psycopg
from django.db import connection

from runtime import states
from runtime.agents import agent
from runtime.approvals.services import approval_decide
from runtime.models import Approval, Task
from tests.conftest import database_url
from tests.runtime.inprocess import run, submit


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
            outcome["approval"] = approval_decide(approval_id=approval.id, tenant="acme", actor="user:bob",
                                                  decision="approve")
        finally:
            connection.close()

    with psycopg.connect(database_url(connection.settings_dict)) as attempt:
        # ...and, holding its row lock (fence_update.sql), read this package as pending and
        # ended `await` again (attempt_end.sql), not yet committed.
        attempt.execute("SELECT 1 FROM steward_task WHERE id = %s FOR UPDATE", [task_id])
        attempt.execute("UPDATE steward_task SET status = 'blocked', blocked_reason = 'approval_pending' "
                        "WHERE id = %s", [task_id])
        decider = threading.Thread(target=decide)
        decider.start()
        time.sleep(0.5)
        assert decider.is_alive(), "the decision did not wait for the attempt holding the task"
        attempt.commit()
    decider.join(10)
    assert outcome["approval"].state == states.APPROVED
    assert Task.objects.get(id=task_id).status == states.QUEUED
    run()
    assert Task.objects.get(id=task_id).output == {"state": states.CONSUMED}
