"""What the stop tests read of a stop (tests/integration/test_stop_worker.py,
tests/console/gateway/test_gateway_stop.py): the task once cancelled, the boundaries'
acknowledgments, and how long after the request something happened."""

from __future__ import annotations

from runtime import states
from runtime.models import AuditEvent, Process, Stop, StopAck, Task
from tests.harness import wait_until


def cancelled(task_id, timeout: float = 30.0) -> Task:
    return wait_until(
        lambda: Task.objects.filter(id=task_id, status=states.CANCELLED).first(),
        timeout=timeout,
        message="the task to be cancelled",
    )


def acks(task_id) -> dict:
    """{boundary: StopAck} of the task's acknowledgments."""
    return {a.boundary: a for a in StopAck.objects.filter(task_id=task_id)}


def since_stop(task: Task, at) -> float:
    """Seconds from the request of the task's stop to `at` (a database time)."""
    return (at - Stop.objects.get(id=task.stop_id).requested_at).total_seconds()


def missing_at_cancel(task_id) -> tuple[bool, list]:
    """What the task.cancelled audit event says: whether every boundary acknowledged,
    and which had not when the task was cancelled."""
    event = AuditEvent.objects.get(task_id=task_id, kind="task.cancelled")
    return event.data["acknowledged"], event.data["missing"]


def sweeping(fleet) -> None:
    """Start a supervisor and wait until it has swept once (it beats after each sweep):
    a stop's bound is the sweep's to enforce."""
    (supervisor,) = fleet.supervisors(1)
    wait_until(
        lambda: Process.objects.filter(kind="supervisor", pid=supervisor.pid).exists(),
        timeout=30,
        message="the supervisor to sweep",
    )
