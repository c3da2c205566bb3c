"""Task: see runtime/models/__init__.py for what the models share."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from runtime import states
from runtime.ids import uuid7
from runtime.models.choices import choices as _choices


class Task(models.Model):
    """The durable logical unit of work. Its id is minted before the first step runs and
    outlives every worker that touches it."""

    # Time-ordered (UUIDv7): steward_submit() mints it from the transaction's clock, so
    # the primary key orders tasks by creation (runtime/ids.py).
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    agent = models.CharField(max_length=200)
    # The version of the agent's code it runs (runtime/agents.py AgentSpec.version), fixed
    # when it starts: NULL until its first claim sets it to the claiming worker's current
    # version; after that only a worker that serves (agent, agent_version) claims it
    # (runtime/sql/claim.sql). "": submitted before versions, claimed by any worker.
    agent_version = models.CharField(max_length=64, blank=True, null=True, default="", db_default="")
    input = models.JSONField()
    input_digest = models.CharField(max_length=64)
    tenant = models.CharField(max_length=100)
    owner = models.CharField(max_length=200, help_text="Actor on whose authority the task runs.")
    # No plain indexes on pool, parent or root: every status change rewrites each index
    # of this hot row, and the partial indexes below already lead with these columns.
    pool = models.ForeignKey(
        "runtime.Pool", on_delete=models.PROTECT, db_column="pool", related_name="tasks", db_index=False
    )
    status = models.CharField(max_length=16, choices=_choices(states.TASK_STATUSES), default=states.QUEUED)
    # The epoch of the latest attempt; 0 before the first claim. Every write by an
    # attempt is fenced on (id, epoch, status='running').
    epoch = models.IntegerField(default=0)
    next_reason = models.CharField(max_length=16, choices=_choices(states.ATTEMPT_REASONS), default=states.FIRST)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children", db_index=False
    )
    root = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="descendants", db_index=False
    )
    spawn_seq = models.IntegerField(null=True, blank=True, help_text="The parent's step seq that spawned it.")
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    crash_count = models.IntegerField(default=0, help_text="Lease expiries in a row.")
    wake_at = models.DateTimeField(null=True, blank=True)
    waiting_on = ArrayField(models.UUIDField(), null=True, blank=True, help_text="Child task ids a wait needs.")
    # What a child asked for at spawn: [{"action": ..., "resource": ...}]. Null: it asks
    # for whatever its parent holds. Its authority never exceeds this (runtime/authz/).
    requested_scope = models.JSONField(null=True, blank=True)
    # Why it is blocked (states.BLOCKED_REASONS), while it is: which operator act releases
    # it. Written by the transition into `blocked`; cleared by the one out of it.
    blocked_reason = models.CharField(max_length=16, null=True, blank=True, choices=_choices(states.BLOCKED_REASONS))
    # The denial that blocked it (authority_denied): the Decision names the boundary,
    # reason_code, policy_version and authz_revision. No index: read from the task only.
    blocked_decision = models.ForeignKey(
        "runtime.Decision", null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    # The breaker that blocked it (breaker_tripped; states.BREAKERS), while it is blocked by
    # one; what it was refused and the limit in force are in `error`. No index: the list
    # filters by status, and a tripped task is read from its row.
    breaker = models.CharField(max_length=32, null=True, blank=True, choices=_choices(states.BREAKERS))
    # An operator's raised (or lowered) limits for this task alone, over its agent's and
    # the fleet's (runtime/limits/breakers.py), set by a resume: {"max_steps": 5000}.
    breaker_limits = models.JSONField(null=True, blank=True)
    # The stop that covers it (runtime/stops/), and when that stop stops waiting for it:
    # the leaves' bound comes first, each level up one bound later.
    stop = models.ForeignKey(
        "runtime.Stop", null=True, blank=True, on_delete=models.PROTECT, related_name="tasks", db_index=False
    )
    stop_deadline = models.DateTimeField(null=True, blank=True)
    # A deliberate new run of a cancelled task (task_rerun) names the run it repeats;
    # the old one finds its new runs through this column (`reruns`).
    rerun_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="reruns", db_index=False
    )
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    status_note = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Tombstone (runtime/lifecycle/, docs/adr/0038-erasure-lifecycle.md): when its payload columns
    # were erased, by which erasure receipt or retention run, and the sha256 of what they held.
    erased_at = models.DateTimeField(null=True, blank=True)
    erased_by = models.CharField(max_length=64, null=True, blank=True)
    erased_hash = models.BinaryField(null=True, blank=True)

    class Meta:
        db_table = "steward_task"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="task_one_per_caller_key",
            ),
            models.UniqueConstraint(
                fields=["parent", "spawn_seq"],
                condition=Q(parent__isnull=False),
                name="task_one_child_per_spawn_step",
            ),
            models.CheckConstraint(condition=Q(status__in=states.TASK_STATUSES), name="task_status_known"),
            models.CheckConstraint(condition=Q(epoch__gte=0), name="task_epoch_non_negative"),
            models.CheckConstraint(
                condition=~Q(status=states.SLEEPING) | Q(wake_at__isnull=False),
                name="task_sleeping_has_wake_at",
            ),
            models.CheckConstraint(
                # isnull too: a CHECK passes on NULL, and `NULL IN (...)` is NULL.
                condition=~Q(status=states.BLOCKED)
                | Q(blocked_reason__isnull=False, blocked_reason__in=states.BLOCKED_REASONS),
                name="task_blocked_says_why",
            ),
            models.CheckConstraint(
                condition=~Q(status=states.BLOCKED, blocked_reason=states.AUTHORITY_DENIED)
                | Q(blocked_decision__isnull=False),
                name="task_denied_names_its_decision",
            ),
            models.CheckConstraint(
                condition=~Q(status=states.BLOCKED, blocked_reason=states.BREAKER_TRIPPED) | Q(breaker__isnull=False),
                name="task_tripped_names_its_breaker",
            ),
            models.CheckConstraint(
                condition=Q(breaker__isnull=True) | Q(breaker__in=states.BREAKERS), name="task_breaker_known"
            ),
            models.CheckConstraint(
                condition=~Q(status=states.STOPPING) | Q(stop__isnull=False, stop_deadline__isnull=False),
                name="task_stopping_names_its_stop",
            ),
        ]
        indexes = [
            # Claim order within a pool, and each pool's oldest queued task for the sweep.
            models.Index(
                fields=["pool", "queued_at", "id"],  # the claim order, read straight off the index
                condition=Q(status=states.QUEUED),
                name="task_claim_order",
            ),
            # No index of running tasks by pool: admission reads kept counts (PoolCount),
            # and a running task always holds a slot, so `pools` counts them through
            # steward_slot. Dropping it saved an index entry on every claim.
            models.Index(fields=["wake_at"], condition=Q(status=states.SLEEPING), name="task_sleeping_due"),
            models.Index(fields=["stop_deadline"], condition=Q(status=states.STOPPING), name="task_stopping_due"),
            models.Index(fields=["stop"], condition=Q(stop__isnull=False), name="task_by_stop"),
            models.Index(fields=["rerun_of"], condition=Q(rerun_of__isnull=False), name="task_reruns"),
            # The list pages (runtime/tasks/selectors.py task_page), newest first by id (ids are
            # time-ordered). Each full index here costs about 8 µs on every write of a
            # task row (status changes are never HOT), some 25 µs per task, about 1% of
            # a task's database time in `make bench`: each one earns it for a listing
            # that would otherwise read the table. The primary key serves all tasks.
            models.Index(fields=["tenant", "id"], name="task_tenant_id"),  # a tenant's tasks
            models.Index(fields=["tenant", "status", "id"], name="task_tenant_status_id"),  # ... by status
            models.Index(fields=["status", "id"], name="task_status_id"),  # every tenant's, by status
            # A tree below its root. Partial: top-level tasks (most) never write it.
            models.Index(fields=["root", "id"], condition=Q(parent__isnull=False), name="task_tree"),
        ]

    def __str__(self):
        return f"{self.agent} {self.id} [{self.status}]"
