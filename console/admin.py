"""The Django admin: read-only pages for the runtime's records, and grants' narrow and
revoke as admin actions through the same services, rights and reasons as the console.

Every change to a task, effect or audit row goes through a runtime service that makes a
conditional write and audits it; the admin must not offer a side door around that. The
journal (steward_step, keyed by (task, seq)) is shown by `manage.py steward show`: the
admin does not support composite primary keys.

Every ModelAdmin here derives from `Scoped`: its rows are those of the tenants where the
signed-in person reads (console/access/principals.py admin_scope; a superuser reads all). The
changelist, its filters' choices, its search, the change form, history and delete pages,
the actions and the autocomplete all start from `get_queryset`, so each sees the same
rows, and another tenant's object is 404 exactly like one that does not exist
(tests/console/test_admin_scoping.py tries each of them on every registered ModelAdmin).
"""

import hashlib

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.http import Http404
from django.template.response import TemplateResponse

from console.access import AdminScope, acting, admin_scope, person_principal, require_grant_change
from runtime.authz.selectors import revocation_preview
from runtime.authz.services import grant_narrow, grant_revoke
from runtime.errors import StewardError
from runtime.models import Attempt, AuditEvent, Effect, Grant, Pool, Slot, Task, WorkerCredential


def _scope(request) -> AdminScope:
    """The person's scope, asked once per request."""
    scope = getattr(request, "_steward_admin_scope", None)
    if scope is None:
        scope = request._steward_admin_scope = admin_scope(request.user)
    return scope


class Scoped(admin.ModelAdmin):
    """A ModelAdmin whose rows are those in the person's scope (`scope`, per model)."""

    def scope(self, queryset, scope: AdminScope):
        raise NotImplementedError(f"{type(self).__name__} must say which rows a person's scope holds")

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        scope = _scope(request)
        return queryset if scope.everything else self.scope(queryset, scope)

    def get_object(self, request, object_id, from_field=None):
        # Django redirects to the index for a missing object; the console's rule is 404, for
        # another tenant's object and a missing one alike.
        key = self.opts.pk if from_field is None else self.opts.get_field(from_field)
        found = super().get_object(request, object_id, from_field) if is_id(key, object_id) else None
        if found is None:
            raise Http404(f"no {self.opts.verbose_name} with that id")
        return found

    def response_action(self, request, queryset):
        # Django narrows the queryset to the selected ids with pk__in, which fails (a 500)
        # on a value that is no id of this model's kind: refuse those as not found.
        if not all(is_id(self.opts.pk, value) for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)):
            self.message_user(request, f"No {self.opts.verbose_name} with that id.", messages.WARNING)
            return None
        return super().response_action(request, queryset)


def is_id(key, value) -> bool:
    """Whether `value` can be a value of the model's key field `key` (its primary key, or
    the field an admin link names): of its kind, and without the NUL that PostgreSQL
    refuses in text (a pool's name is its id)."""
    try:
        key.to_python(value)
    except ValidationError:
        return False
    return "\x00" not in str(value)


class InTenant(Scoped):
    """Rows that carry their tenant, at `tenant_field`."""

    tenant_field = "tenant"
    ordering = ("-pk",)  # the autocomplete pages through get_queryset, which must be ordered

    def scope(self, queryset, scope: AdminScope):
        return queryset.filter(**{f"{self.tenant_field}__in": scope.tenants})


class ReadOnly:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Task)
class TaskAdmin(ReadOnly, InTenant):
    list_display = ["id", "agent", "status", "epoch", "pool", "tenant", "owner", "updated_at"]
    list_filter = ["status", ("pool", admin.RelatedOnlyFieldListFilter), "agent", "tenant"]
    search_fields = ["id", "agent", "idempotency_key", "owner"]
    date_hierarchy = "created_at"


@admin.register(Attempt)
class AttemptAdmin(ReadOnly, InTenant):
    tenant_field = "task__tenant"
    list_display = ["task", "epoch", "reason", "worker", "started_at", "ended_at", "end_reason"]
    list_filter = ["reason", "end_reason"]


@admin.register(Effect)
class EffectAdmin(ReadOnly, InTenant):
    list_display = ["id", "name", "effect_class", "keyed", "state", "sends", "task", "created_at"]
    list_filter = ["state", "effect_class"]
    search_fields = ["key", "name"]


@admin.register(Pool)
class PoolAdmin(ReadOnly, Scoped):
    list_display = ["name", "max_running", "max_queued", "created_at"]
    ordering = ("name",)

    def scope(self, queryset, scope: AdminScope):
        return queryset if scope.fleet else queryset.none()


@admin.register(Slot)
class SlotAdmin(ReadOnly, Scoped):
    """A free slot is the fleet's; a taken one shows its task, so it is the task's tenant's."""

    list_display = ["pool", "number", "task", "epoch", "taken_at"]
    ordering = ("pool", "number")

    def scope(self, queryset, scope: AdminScope):
        free = Q(task__isnull=True) if scope.fleet else Q(pk__in=[])
        return queryset.filter(free | Q(task__tenant__in=scope.tenants))


@admin.register(WorkerCredential)
class WorkerCredentialAdmin(ReadOnly, Scoped):
    """Workers' credentials for the minting service (docs/adr/0034-token-minting.md): the
    deployment's, so a superuser's alone; made and revoked with `manage.py steward workers
    credentials`. The secret's hash is not shown."""

    list_display = ["id", "name", "created_at", "created_by", "revoked_at", "uses", "last_used_at"]
    exclude = ["secret_hash"]
    ordering = ("-created_at", "id")

    def scope(self, queryset, scope: AdminScope):
        return queryset.none()


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnly, InTenant):
    list_display = ["id", "at", "kind", "actor", "tenant", "task_id", "chain", "chain_seq"]
    list_filter = ["kind", "tenant"]
    search_fields = ["task_id", "actor", "kind"]


# People and groups: django.contrib.auth registered them unscoped; these replace its pages.
admin.site.unregister(get_user_model())
admin.site.unregister(Group)


class DeploymentOnly:
    """Changing a person (password, staff, superuser, permissions) or a group is the
    deployment's business: a superuser's, from here; a tenant's members change in the
    console (members). Anyone else with the admin's permissions reads, in scope."""

    def has_add_permission(self, request, obj=None):
        return _scope(request).everything and super().has_add_permission(request)

    def has_change_permission(self, request, obj=None):
        return _scope(request).everything and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return _scope(request).everything and super().has_delete_permission(request, obj)


@admin.register(get_user_model())
class PersonAdmin(DeploymentOnly, Scoped, UserAdmin):
    # Outside a superuser's view: who a person is, not how they sign in or what else they hold.
    PLAIN = ((None, {"fields": ("username", "first_name", "last_name", "email", "is_active", "last_login")}),)

    def scope(self, queryset, scope: AdminScope):
        return queryset.filter(pk__in=scope.people())

    def get_fieldsets(self, request, obj=None):
        return super().get_fieldsets(request, obj) if _scope(request).everything else self.PLAIN

    def get_list_filter(self, request):
        # The groups filter would list every group's name; groups are a superuser's.
        return super().get_list_filter(request) if _scope(request).everything else ("is_staff", "is_active")


@admin.register(Group)
class GroupsAdmin(DeploymentOnly, Scoped, GroupAdmin):
    def scope(self, queryset, scope: AdminScope):
        return queryset.none()  # Steward's roles are memberships; a group is no tenant's


@admin.register(Grant)
class GrantAdmin(ReadOnly, InTenant):
    """Grants, read-only but for two actions: narrow and revoke, each after a page that
    previews what it reaches and asks for a reason, each through runtime.authz.services
    as the signed-in person, who must have the right in the grant's tenant exactly as in
    the console (console/access/): being a superuser here is no right over a tenant."""

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
        if not grants:  # the selection names none the person reads (get_queryset)
            self.message_user(request, "None of the selected grants was found.", messages.WARNING)
            return None
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
