"""Read-only admin pages for the runtime's records, and grants' narrow and revoke as
admin actions through the same services, rights and reasons as the console.

Every change to a task, effect or audit row goes through a runtime service that makes a
conditional write and audits it; the admin must not offer a side door around that. The
journal (steward_step, keyed by (task, seq)) is shown by `manage.py steward show`: the
admin does not support composite primary keys.
"""

import hashlib

from django.contrib import admin, messages
from django.template.response import TemplateResponse

from console.access import acting, person_principal, require_grant_change
from runtime.authz.selectors import revocation_preview
from runtime.authz.services import grant_narrow, grant_revoke
from runtime.errors import StewardError
from runtime.models import Attempt, AuditEvent, Effect, Grant, Pool, Slot, Task


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


@admin.register(Grant)
class GrantAdmin(ReadOnly):
    """Grants, read-only but for two actions: narrow and revoke, each after a page that
    previews what it reaches and asks for a reason, each through runtime.authz.services
    as the signed-in person, who must have the right in the grant's tenant exactly as in
    the console (console/access.py): being a superuser here is no right over a tenant."""

    list_display = [
        "id",
        "tenant",
        "principal",
        "action",
        "resource",
        "expires_at",
        "granted_by",
        "revoked_at",
        "revoked_by",
        "revision",
    ]
    list_filter = ["tenant", "action"]
    search_fields = ["principal", "resource"]
    actions = ["revoke_grants", "narrow_grants"]

    @admin.action(description="Revoke the selected grants…")
    def revoke_grants(self, request, queryset):
        return self._change(request, queryset, "revoke")

    @admin.action(description="Narrow the selected grants (an earlier expiry or a narrower resource)…")
    def narrow_grants(self, request, queryset):
        return self._change(request, queryset, "narrow")

    def _change(self, request, queryset, action: str):
        grants = list(queryset.order_by("id"))
        if request.POST.get("confirm") != "yes":
            previews = []
            for g in grants:
                try:
                    previews.append((g, revocation_preview(tenant=g.tenant, grant_id=g.id)))
                except StewardError:
                    previews.append((g, None))
            return TemplateResponse(
                request,
                "admin/grant_change.html",
                {
                    **self.admin_site.each_context(request),
                    "title": f"{action.title()} grants",
                    "action": action,
                    "previews": previews,
                    "opts": self.model._meta,
                    "action_name": f"{action}_grants",
                    "selected": [g.id for g in grants],
                },
            )
        reason = (request.POST.get("reason") or "").strip()
        credential = f"admin:{hashlib.sha256((request.session.session_key or '').encode()).hexdigest()[:12]}"
        done = 0
        for g in grants:
            try:
                who = require_grant_change(
                    person_principal(request.user, g.tenant, channel="admin", credential=credential), g.principal
                )
                with acting(who):
                    if action == "revoke":
                        grant_revoke(grant_id=g.id, tenant=g.tenant, actor=who.actor, reason=reason)
                    else:
                        grant_narrow(
                            grant_id=g.id,
                            tenant=g.tenant,
                            resource=request.POST.get("resource") or None,
                            expires_at=_moment(request.POST.get("expires_at")),
                            actor=who.actor,
                            reason=reason,
                        )
                done += 1
            except StewardError as exc:
                self.message_user(request, f"grant #{g.id}: {exc.code}: {exc.message}", messages.ERROR)
        if done:
            self.message_user(
                request, f"{'Revoked' if action == 'revoke' else 'Narrowed'} {done} grant(s).", messages.SUCCESS
            )
        return None


def _moment(value):
    from console.ui.web import when

    return when((value or "").strip() or None, "expires_at")
