"""Running attempts inside the test process: submit, run the executor, sweep.

Enough for tests of the replay and ledger protocols that need no worker process.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone as djtz

from runtime import states
from runtime.limits import services as pools
from runtime.models import Attempt, Task
from runtime.tasks.services import task_submit
from runtime.worker.executor import run_pool
from runtime.worker.supervisor import sweep
from tests.harness import wait_until

NAP = 0.05  # the durable sleep between attempts: long enough to end the attempt


def submit(agent_name: str, input: dict | None = None, *, tenant: str = "acme"):
    owner = "user:alice" if tenant == "acme" else "user:carol"
    return task_submit(agent=agent_name, input=input or {}, tenant=tenant, owner=owner, actor=owner).task_id


def run() -> int:
    return run_pool(pool=pools.default_pool_name(), worker="test")


def wake() -> None:
    """Sweep, as the supervisor does, until a due timer has woken its task."""
    wait_until(lambda: sweep(supervisor_id="test").woken, message="a timer to come due")


def recover(task_id) -> None:
    """What the supervisor does once a lease lapses. The lease keeper may renew it
    between our UPDATE and the sweep, so expire and sweep until the task is re-queued."""

    def recovered():
        Attempt.objects.filter(task_id=task_id, ended_at__isnull=True).update(
            lease_expires_at=djtz.now() - timedelta(seconds=1)
        )
        sweep(supervisor_id="test")
        return Task.objects.get(id=task_id).status == states.QUEUED

    wait_until(recovered, message="the supervisor to recover the task")
