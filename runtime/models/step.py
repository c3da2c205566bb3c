"""Step: see runtime/models/__init__.py for what the models share."""

from __future__ import annotations

from django.db import models


class Step(models.Model):
    """A journal row: the recorded outcome of call number `seq` in a task.

    Keyed by (task, seq) itself: the hottest table carries one index, not three.
    """

    pk = models.CompositePrimaryKey("task_id", "seq")
    # No foreign-key constraint: step_insert.sql only inserts by selecting the task row
    # FOR SHARE, so the row exists and is locked at commit, and tasks are never deleted.
    # The constraint's deferred check cost a third of the fleet's throughput (ADR 0003).
    task = models.ForeignKey(
        "runtime.Task", on_delete=models.PROTECT, related_name="steps", db_index=False, db_constraint=False
    )
    seq = models.IntegerField()
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16)  # states.StepKind
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    epoch = models.IntegerField(help_text="The attempt that wrote it.")
    # Its output came from outside (a model's or a tool's reply): evidence, never authority.
    # Nothing reads an untrusted value as an actor, a grant, a policy or an approval.
    untrusted = models.BooleanField(db_default=False)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    # Tombstone (runtime/lifecycle/, docs/adr/0038-erasure-lifecycle.md): when its payload columns
    # were erased, by which erasure receipt or retention run, and the sha256 of what they held.
    erased_at = models.DateTimeField(null=True, blank=True)
    erased_by = models.CharField(max_length=64, null=True, blank=True)
    erased_hash = models.BinaryField(null=True, blank=True)

    class Meta:
        db_table = "steward_step"

    def __str__(self):
        return f"{self.task_id}#{self.seq} {self.name}"
