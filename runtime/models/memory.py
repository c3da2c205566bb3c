"""MemoryRecord: see runtime/models/__init__.py for what the models share, and
runtime/memory/ for how records are written, upgraded, rolled back and read."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now

from runtime import states
from runtime.models.choices import choices as _choices


class MemoryRecord(models.Model):
    """One version of one agent memory record: (tenant, agent, kind, key, version).

    Versions are appended, never changed: an update, an upgrade and a rollback each insert
    the next version, so the history is the rows. The current version is the highest.
    The one UPDATE any role may make is the retention/erasure's (docs/adr/0039-agent-memory.md,
    the "memory" place of runtime/lifecycle/registry.py): `payload` set to NULL with the
    erased_* columns, `payload_hash` kept, so an erased version stays a tombstone that
    still proves what was there; the table's trigger (steward_memory_record_only_erased)
    refuses any other. Workers may SELECT and INSERT, and UPDATE only those columns for
    the retention job (runtime/roles.py)."""

    id = models.BigAutoField(primary_key=True)
    # The scope: one agent's memory within one tenant, shared by every task of that agent
    # in that tenant (and by nothing else).
    tenant = models.CharField(max_length=100)
    agent = models.CharField(max_length=200)
    kind = models.CharField(max_length=100)  # a @memory_kind's name
    key = models.CharField(max_length=200)
    version = models.IntegerField()  # 1, 2, ...: dense per record, the compare-and-set's key
    schema_version = models.IntegerField()  # the kind's schema version its payload fits
    # The payload, kept apart from everything else so that erasing it is one column:
    # NULL once erased; `payload_hash` (sha256 of its canonical JSON) stays.
    payload = models.JSONField(null=True, blank=True)
    payload_hash = models.CharField(max_length=64)
    change = models.CharField(max_length=16, choices=_choices(states.MEMORY_CHANGES))
    # Provenance: where the content came from, and which task, attempt (epoch) and journal
    # step (seq) wrote it; a person's write or rollback has no task and names the actor.
    source = models.CharField(max_length=16, choices=_choices(states.MEMORY_SOURCES))
    untrusted = models.BooleanField()  # source is a model or a tool: see runtime/taint.py
    task_id = models.UUIDField(null=True, blank=True)
    epoch = models.IntegerField(null=True, blank=True)
    seq = models.IntegerField(null=True, blank=True)
    actor = models.CharField(max_length=200)  # agent:<name>, or the person (upgrade: who ran it)
    from_version = models.IntegerField(null=True, blank=True)  # upgrade or rollback: the version it carries
    reason = models.CharField(max_length=500, blank=True, default="")
    # Its validity window, on the database's clock: a read after valid_until finds nothing.
    valid_from = models.DateTimeField(db_default=Now())
    valid_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())
    # Tombstone (runtime/lifecycle/): when and by what (an erasure receipt or a retention
    # run) the payload was erased, and the sha256 of what it held.
    erased_at = models.DateTimeField(null=True, blank=True)
    erased_by = models.CharField(max_length=64, null=True, blank=True)
    erased_hash = models.BinaryField(null=True, blank=True)

    class Meta:
        db_table = "steward_memory_record"
        constraints = [
            # The compare-and-set (runtime/sql/memory_insert.sql): two writers of the same
            # next version race here, and one inserts nothing.
            models.UniqueConstraint(fields=["tenant", "agent", "kind", "key", "version"], name="memory_version_once"),
            models.CheckConstraint(condition=Q(version__gte=1), name="memory_version_positive"),
            models.CheckConstraint(condition=Q(schema_version__gte=1), name="memory_schema_positive"),
            models.CheckConstraint(condition=Q(change__in=states.MEMORY_CHANGES), name="memory_change_known"),
            models.CheckConstraint(condition=Q(source__in=states.MEMORY_SOURCES), name="memory_source_known"),
            # The taint follows the source, and nothing can say otherwise.
            models.CheckConstraint(
                condition=Q(untrusted=True, source__in=states.UNTRUSTED_SOURCES)
                | (Q(untrusted=False) & ~Q(source__in=states.UNTRUSTED_SOURCES)),
                name="memory_untrusted_is_its_source",
            ),
            models.CheckConstraint(
                condition=Q(valid_until__isnull=True) | Q(valid_until__gt=F("valid_from")),
                name="memory_window_ordered",
            ),
        ]
        # The browser's page of an agent's records, newest first (runtime/memory/selectors.py).
        indexes = [
            models.Index(fields=["tenant", "agent", "id"], name="memory_agent_id"),
            # An erasure of a task's tree or an owner's tasks finds the versions they wrote.
            models.Index(fields=["task_id"], name="memory_task", condition=Q(task_id__isnull=False)),
        ]

    def __str__(self):
        return f"{self.agent} {self.kind}/{self.key} v{self.version}"
