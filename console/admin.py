"""Read-only admin pages for the runtime's records.

Every change to a task, effect or audit row goes through a runtime service that makes a
conditional write and audits it; the admin must not offer a side door around that. The
journal (steward_step, keyed by (task, seq)) is shown by `manage.py steward show`: the
admin does not support composite primary keys.
"""

from django.contrib import admin

from runtime.models import Attempt, AuditEvent, Effect, Pool, Slot, Task


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Task)
class TaskAdmin(ReadOnly):
    list_display = ["id", "agent", "status", "epoch", "pool", "tenant", "owner", "updated_at"]
    list_filter = ["status", "pool", "agent", "tenant"]
    search_fields = ["id", "agent", "idempotency_key", "owner"]
    date_hierarchy = "created_at"


@admin.register(Attempt)
class AttemptAdmin(ReadOnly):
    list_display = ["task", "epoch", "reason", "worker", "started_at", "ended_at", "end_reason"]
    list_filter = ["reason", "end_reason"]


@admin.register(Effect)
class EffectAdmin(ReadOnly):
    list_display = ["id", "name", "effect_class", "keyed", "state", "sends", "task", "created_at"]
    list_filter = ["state", "effect_class"]
    search_fields = ["key", "name"]


@admin.register(Pool)
class PoolAdmin(ReadOnly):
    list_display = ["name", "max_running", "max_queued", "created_at"]


@admin.register(Slot)
class SlotAdmin(ReadOnly):
    list_display = ["pool", "number", "task", "epoch", "taken_at"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnly):
    list_display = ["id", "at", "kind", "actor", "tenant", "task_id", "chain", "chain_seq"]
    list_filter = ["kind", "tenant"]
    search_fields = ["task_id", "actor", "kind"]
