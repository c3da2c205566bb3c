"""Pool, PoolCount: see runtime/models/__init__.py for what the models share."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class Pool(models.Model):
    """A fleet-wide concurrency pool. `max_running` is enforced by slot rows (one per
    allowed concurrent attempt) so that claiming is a SKIP LOCKED row grab, not a count.
    """

    # One index: migration 0005 dropped the varchar_pattern_ops twin Django adds.
    name = models.SlugField(primary_key=True, max_length=100)
    max_running = models.PositiveIntegerField()
    max_queued = models.PositiveIntegerField()
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_pool"

    def __str__(self):
        return f"{self.name} (running≤{self.max_running}, queued≤{self.max_queued})"


class PoolCount(models.Model):
    """A pool's admitted tasks (queued + running), kept instead of counted.

    Triggers on steward_task (migration 0004) add +1 or -1 whenever a row enters or
    leaves {queued, running}, to the row of the backend that made the change
    (shard = pg_backend_pid()): no two open transactions ever write the same row, so
    workers ending attempts never wait on each other or deadlock here. The supervisor
    folds the rows of backends that have gone into shard 0. steward_submit() sums a
    pool's rows under the pool's row lock (docs/adr/0010-kept-admission-counts.md).
    """

    pk = models.CompositePrimaryKey("pool", "shard")
    # No database constraint: the trigger's rare INSERT would take a KEY SHARE lock on
    # the pool row and queue behind every submit holding it FOR UPDATE. A pool's tasks
    # already guarantee it exists; deleting a pool through the ORM deletes its rows.
    pool = models.ForeignKey(
        "runtime.Pool",
        on_delete=models.CASCADE,
        db_column="pool",
        related_name="counts",
        db_constraint=False,
        db_index=False,
    )
    shard = models.IntegerField(help_text="The backend pid that wrote it; 0 for folded rows.")
    admitted = models.BigIntegerField(default=0, help_text="Its share of the pool's queued + running tasks.")

    class Meta:
        db_table = "steward_pool_count"

    def __str__(self):
        return f"{self.pool_id}#{self.shard}: {self.admitted:+d}"
