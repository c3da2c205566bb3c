"""Slot: see runtime/models/__init__.py for what the models share."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class Slot(models.Model):
    """One unit of a pool's running capacity. A slot is held by (task, epoch) while
    that attempt runs, and freed in the same transaction that ends the attempt."""

    pool = models.ForeignKey(
        "runtime.Pool", on_delete=models.CASCADE, db_column="pool", related_name="slots", db_index=False
    )
    number = models.IntegerField()
    task = models.OneToOneField("runtime.Task", null=True, blank=True, on_delete=models.PROTECT, related_name="slot")
    epoch = models.IntegerField(null=True, blank=True)
    taken_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "steward_slot"
        constraints = [
            models.UniqueConstraint(fields=["pool", "number"], name="slot_number_per_pool"),
            models.CheckConstraint(
                condition=Q(task__isnull=True, epoch__isnull=True) | Q(task__isnull=False, epoch__isnull=False),
                name="slot_holder_has_epoch",
            ),
        ]
        indexes = [models.Index(fields=["pool"], condition=Q(task__isnull=True), name="slot_free_by_pool")]

    def __str__(self):
        return f"{self.pool_id}#{self.number} -> {self.task_id or 'free'}"
