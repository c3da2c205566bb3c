"""TreePause: see runtime/models/__init__.py for what the models share, and
runtime/limits/pauses.py for how a pause is made and lifted."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from runtime import states
from runtime.models.choices import choices as _choices


class TreePause(models.Model):
    """A fan-out breaker tripped in a tree, so the whole tree is paused for an operator:
    no task of it takes a new step or spawns until the pause is lifted (`released_at`).
    Kept after it is lifted, as the record of what was paused, by what and for how long.
    Written only by Steward (the executor, an operator's resume), never from a
    connection running agent code (the migration's trigger)."""

    id = models.BigAutoField(primary_key=True)
    root = models.ForeignKey("runtime.Task", on_delete=models.PROTECT, related_name="+", db_index=False)
    tenant = models.CharField(max_length=100)
    # The task whose spawn was refused; its own row says `breaker_tripped`, the rest of
    # the tree's live tasks `tree_paused`.
    task = models.ForeignKey("runtime.Task", on_delete=models.PROTECT, related_name="+", db_index=False)
    breaker = models.CharField(max_length=32, choices=_choices(sorted(states.FANOUT_BREAKERS)))
    limit = models.IntegerField()
    observed = models.IntegerField()
    paused_at = models.DateTimeField(db_default=Now())
    # How many idle tasks (queued, sleeping, waiting) the pause held at once; running ones
    # end at their next new step, each audited as it does.
    held = models.IntegerField(default=0)
    released_at = models.DateTimeField(null=True, blank=True)
    released_by = models.CharField(max_length=200, blank=True, default="")
    # How many tasks the release queued again (those still held by it then).
    released = models.IntegerField(null=True, blank=True)

    class Meta:
        db_table = "steward_tree_pause"
        constraints = [
            # One open pause per tree: a second trip while paused joins the first.
            models.UniqueConstraint(fields=["root"], condition=Q(released_at__isnull=True), name="tree_pause_one_open"),
            models.CheckConstraint(
                condition=Q(breaker__in=sorted(states.FANOUT_BREAKERS)), name="tree_pause_breaker_fanout"
            ),
            models.CheckConstraint(
                condition=Q(released_at__isnull=True) | ~Q(released_by=""), name="tree_pause_released_by_someone"
            ),
        ]
        # A tree's pauses, newest first (the task page); the open one is the partial
        # unique index above, probed on every attempt's first new step. A tenant's open
        # pauses for the dashboard: few rows, however long the history grows.
        indexes = [
            models.Index(fields=["root", "id"], name="tree_pause_root"),
            models.Index(fields=["tenant", "id"], condition=Q(released_at__isnull=True), name="tree_pause_open_tenant"),
        ]

    def __str__(self):
        return f"pause {self.id} of tree {self.root_id} ({self.breaker})"
