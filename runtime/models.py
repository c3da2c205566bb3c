"""Durable records. Models stay thin: fields, constraints, __str__ and small pure
properties. Writes happen in the services (submission, transitions, effects, ...), each
a conditional UPDATE or a fenced INSERT that reports whether it won.

Table names are explicit because the hot paths use hand-written SQL (runtime/sql/).
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from runtime import states
from runtime.ids import uuid7


def _choices(values):
    return [(v, v) for v in values]


class Pool(models.Model):
    """A fleet-wide concurrency pool. `max_running` is enforced by slot rows (one per
    allowed concurrent attempt) so that claiming is a SKIP LOCKED row grab, not a count.
    """

    # One index: migration 0005 dropped the varchar_pattern_ops twin Django adds.
    name = models.SlugField(primary_key=True, max_length=100)
    max_running = models.PositiveIntegerField()
    max_queued = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

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
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, db_column="pool", related_name="counts",
                             db_constraint=False, db_index=False)
    shard = models.IntegerField(help_text="The backend pid that wrote it; 0 for folded rows.")
    admitted = models.BigIntegerField(default=0, help_text="Its share of the pool's queued + running tasks.")

    class Meta:
        db_table = "steward_pool_count"

    def __str__(self):
        return f"{self.pool_id}#{self.shard}: {self.admitted:+d}"


class Task(models.Model):
    """The durable logical unit of work. Its id is minted before the first step runs and
    outlives every worker that touches it."""

    # Time-ordered (UUIDv7): steward_submit() mints it from the transaction's clock, so
    # the primary key orders tasks by creation (runtime/ids.py).
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    agent = models.CharField(max_length=200)
    input = models.JSONField()
    input_digest = models.CharField(max_length=64)
    tenant = models.CharField(max_length=100)
    owner = models.CharField(max_length=200, help_text="Actor on whose authority the task runs.")
    # No plain indexes on pool, parent or root: every status change rewrites each index
    # of this hot row, and the partial indexes below already lead with these columns.
    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, db_column="pool", related_name="tasks",
                             db_index=False)
    status = models.CharField(max_length=16, choices=_choices(states.TASK_STATUSES), default=states.QUEUED)
    # The epoch of the latest attempt; 0 before the first claim. Every write by an
    # attempt is fenced on (id, epoch, status='running').
    epoch = models.IntegerField(default=0)
    next_reason = models.CharField(max_length=16, choices=_choices(states.ATTEMPT_REASONS), default=states.FIRST)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children",
                               db_index=False)
    root = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="descendants",
                             db_index=False)
    spawn_seq = models.IntegerField(null=True, blank=True, help_text="The parent's step seq that spawned it.")
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    crash_count = models.IntegerField(default=0, help_text="Lease expiries in a row.")
    wake_at = models.DateTimeField(null=True, blank=True)
    waiting_on = ArrayField(models.UUIDField(), null=True, blank=True, help_text="Child task ids a wait needs.")
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    status_note = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

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
            # The list pages (runtime/selectors.py task_page), newest first by id (ids are
            # time-ordered). Each full index here costs about 8 µs on every write of a
            # task row (status changes are never HOT), some 25 µs per task, about 1% of
            # a task's database time in `make bench`: each one earns it for a listing
            # that would otherwise read the table. The primary key serves all tasks.
            models.Index(fields=["tenant", "id"], name="task_tenant_id"),             # a tenant's tasks
            models.Index(fields=["tenant", "status", "id"], name="task_tenant_status_id"),  # ... by status
            models.Index(fields=["status", "id"], name="task_status_id"),             # every tenant's, by status
            # A tree below its root. Partial: top-level tasks (most) never write it.
            models.Index(fields=["root", "id"], condition=Q(parent__isnull=False), name="task_tree"),
        ]

    def __str__(self):
        return f"{self.agent} {self.id} [{self.status}]"


class Attempt(models.Model):
    """One execution of a task by one worker. `epoch` is the fencing token."""

    # Indexed by the unique (task, epoch) constraint.
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="attempts", db_index=False)
    epoch = models.IntegerField()
    worker = models.CharField(max_length=200)
    reason = models.CharField(max_length=16, choices=_choices(states.ATTEMPT_REASONS))
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    lease_expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        db_table = "steward_attempt"
        constraints = [
            models.UniqueConstraint(fields=["task", "epoch"], name="attempt_one_per_epoch"),
            models.UniqueConstraint(
                fields=["task"], condition=Q(ended_at__isnull=True), name="attempt_one_live_per_task"
            ),
            models.CheckConstraint(condition=Q(epoch__gte=1), name="attempt_epoch_positive"),
        ]
        indexes = [
            models.Index(fields=["lease_expires_at"], condition=Q(ended_at__isnull=True), name="attempt_live_lease"),
        ]

    def __str__(self):
        return f"attempt {self.epoch} of {self.task_id} on {self.worker}"


class Step(models.Model):
    """A journal row: the recorded outcome of call number `seq` in a task.

    Keyed by (task, seq) itself: the hottest table carries one index, not three.
    """

    pk = models.CompositePrimaryKey("task_id", "seq")
    # No foreign-key constraint: step_insert.sql only inserts by selecting the task row
    # FOR SHARE, so the row exists and is locked at commit, and tasks are never deleted.
    # The constraint's deferred check cost a third of the fleet's throughput (ADR 0003).
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="steps", db_index=False,
                             db_constraint=False)
    seq = models.IntegerField()
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16)  # step, effect, sleep, spawn, wait, now, random
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    epoch = models.IntegerField(help_text="The attempt that wrote it.")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()

    class Meta:
        db_table = "steward_step"

    def __str__(self):
        return f"{self.task_id}#{self.seq} {self.name}"


class Effect(models.Model):
    """The effect ledger: one row per external action, keyed by its idempotency key."""

    key = models.CharField(max_length=255, unique=True)
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="effects", db_index=False)
    step_seq = models.IntegerField()
    name = models.CharField(max_length=200)
    effect_class = models.CharField(max_length=16, choices=_choices(states.EFFECT_CLASSES))
    keyed = models.BooleanField(help_text="Whether the target service deduplicates by our key.")
    state = models.CharField(max_length=16, choices=_choices(states.EFFECT_STATES))
    request_digest = models.CharField(max_length=64)
    receipt = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    attempt = models.ForeignKey(Attempt, on_delete=models.PROTECT, related_name="effects", db_index=False)
    epoch = models.IntegerField(help_text="Epoch of the attempt that last sent it.")
    sends = models.IntegerField(default=0, help_text="Times it was handed to the service.")
    resend_approved = models.BooleanField(default=False, help_text="An operator chose to send it again.")
    created_at = models.DateTimeField(auto_now_add=True)
    settled_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=200, blank=True, default="")
    resolution_note = models.TextField(blank=True, default="")

    class Meta:
        db_table = "steward_effect"
        constraints = [
            models.CheckConstraint(condition=Q(state__in=states.EFFECT_STATES), name="effect_state_known"),
            models.CheckConstraint(condition=Q(effect_class__in=states.EFFECT_CLASSES), name="effect_class_known"),
            models.UniqueConstraint(fields=["task", "step_seq"], name="effect_one_per_step"),
        ]
        # The ledger's pages (runtime/selectors.py effect_page): by state newest first;
        # a task's effects come from effect_one_per_step. The key's unique index is its
        # only one (migration 0005 dropped Django's varchar_pattern_ops twin: nothing
        # matches keys by prefix), and `attempt` has none (nothing looks effects up by
        # attempt, and attempts are never deleted): two fewer index writes per change.
        indexes = [models.Index(fields=["state", "id"], name="effect_state_id")]

    def __str__(self):
        return f"{self.name} [{self.state}] {self.key}"


class Slot(models.Model):
    """One unit of a pool's running capacity. A slot is held by (task, epoch) while
    that attempt runs, and freed in the same transaction that ends the attempt."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, db_column="pool", related_name="slots", db_index=False)
    number = models.IntegerField()
    task = models.OneToOneField(Task, null=True, blank=True, on_delete=models.PROTECT, related_name="slot")
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


class AuditEvent(models.Model):
    """Append-only and hash-chained. Triggers (migrations 0002, 0006) fill chain_seq,
    prev_hash and hash on INSERT and refuse every UPDATE and DELETE.

    Each task has its own chain ("task:<id>"); events about no task chain per tenant.
    Per-chain hashing keeps the chain lock as narrow as the task row lock that every
    transition already holds (docs/adr/0004-audit-chains.md).
    """

    chain = models.CharField(max_length=120)
    chain_seq = models.IntegerField(db_default=0)
    at = models.DateTimeField(db_default=Now())  # the trigger sets it to now(), always
    actor = models.CharField(max_length=200)
    tenant = models.CharField(max_length=100)
    task_id = models.UUIDField(null=True, blank=True)
    kind = models.CharField(max_length=64)
    data = models.JSONField(default=dict)
    # sha256 as 32 raw bytes (migration 0006); the hash input carries prev_hash as hex.
    prev_hash = models.BinaryField(db_default=b"")
    hash = models.BinaryField(db_default=b"")

    class Meta:
        db_table = "steward_audit"
        constraints = [models.UniqueConstraint(fields=["chain", "chain_seq"], name="audit_chain_seq")]
        # A tenant's trail newest first, and a time range of it, off one index
        # (runtime/selectors.py audit_page); a task's events are its chain, found
        # through audit_chain_seq.
        indexes = [models.Index(fields=["tenant", "at", "id"], name="audit_tenant_at")]

    def __str__(self):
        return f"#{self.id} {self.kind} by {self.actor}"
