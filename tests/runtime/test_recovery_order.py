"""A task recovered from a lapsed lease goes back to its old place in the claim order,
ahead of work queued after it (runtime/sql/recover_expired.sql): a crash must not send
admitted work to the back of the queue. Its queue wait, for the metrics, still counts
from the recovery, not from when it was first queued (runtime/sql/claim.sql)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from runtime.attempts.lease import claim_next
from runtime.limits.services import default_pool_name
from runtime.meter import meter
from runtime.models import Task
from tests.runtime.inprocess import recover, submit


def claim():
    claimed = claim_next(pool=default_pool_name(), worker="test")
    assert claimed is not None
    return claimed


def test_a_recovered_task_is_claimed_before_tasks_queued_after_it(live):
    first = submit("t.steps", {"n": 1})
    assert claim().lease.task_id == first
    later = [submit("t.steps", {"n": 1}) for _ in range(3)]

    recover(first)

    assert claim().lease.task_id == first  # not behind the three queued while it ran
    assert [claim().lease.task_id for _ in later] == later


def test_a_recovered_task_s_wait_counts_from_its_recovery(live, monkeypatch):
    waits = []
    monkeypatch.setattr(meter, "waited", lambda seconds, **_: waits.append(seconds))
    first = submit("t.steps", {"n": 1})
    # Queued an hour ago: a wait counted from queued_at would be about 3,600 s.
    Task.objects.filter(id=first).update(queued_at=timezone.now() - timedelta(hours=1))
    claim()
    recover(first)

    assert claim().lease.task_id == first
    assert Task.objects.get(id=first).queued_at < timezone.now() - timedelta(minutes=59)  # its place kept
    assert len(waits) == 2 and waits[0] > 3_500 and waits[1] < 60
