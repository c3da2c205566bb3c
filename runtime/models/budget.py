"""Budget, TokenUsage, Quota: see runtime/models/__init__.py for what the models share.

Operators set them (runtime/limits/budgets.py), the credential gateway enforces them
(runtime/sql/authz_decide.sql, gateway_call_finish.sql; docs/adr/0019-budgets.md)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

# What a token budget bounds: one task's calls, a whole tree's (a child's usage counts
# against its root's), or everything the tenant's tasks ever called.
BUDGET_SCOPES = ("task", "tree", "tenant")
# TokenUsage rows per subject: a finish adds to the shard of its backend
# (pg_backend_pid() % USAGE_SHARDS), so concurrent finishes of one tenant seldom wait on
# one row; admission sums a subject's few rows by index.
USAGE_SHARDS = 8


class Budget(models.Model):
    """A tenant's model-token budgets, each NULL for none: per task, per tree (the root
    and all its descendants together) and for the whole tenant. `version` grows by one
    with each change: a change names the version it read (a conditional write)."""

    tenant = models.CharField(primary_key=True, max_length=100)
    task_tokens = models.BigIntegerField(null=True)
    tree_tokens = models.BigIntegerField(null=True)
    tenant_tokens = models.BigIntegerField(null=True)
    version = models.IntegerField(default=1)
    updated_by = models.CharField(max_length=200)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_budget"
        constraints = [
            models.CheckConstraint(
                condition=Q(task_tokens__gte=0) | Q(task_tokens__isnull=True), name="budget_task_tokens_nonnegative"
            ),
            models.CheckConstraint(
                condition=Q(tree_tokens__gte=0) | Q(tree_tokens__isnull=True), name="budget_tree_tokens_nonnegative"
            ),
            models.CheckConstraint(
                condition=Q(tenant_tokens__gte=0) | Q(tenant_tokens__isnull=True),
                name="budget_tenant_tokens_nonnegative",
            ),
        ]

    def __str__(self):
        return (
            f"{self.tenant}: task≤{self.task_tokens}, tree≤{self.tree_tokens}, "
            f"tenant≤{self.tenant_tokens} (v{self.version})"
        )


class TokenUsage(models.Model):
    """Model tokens counted at the credential gateway, kept instead of summed: each
    call's finish adds its tokens to its task's, its tree's and its tenant's row (in
    its backend's shard). `subject` is the task's id, the root's id, or the tenant."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.CharField(max_length=100)
    scope = models.CharField(max_length=8)
    subject = models.CharField(max_length=100)
    shard = models.SmallIntegerField()
    tokens = models.BigIntegerField(default=0)
    calls = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_token_usage"
        constraints = [
            models.CheckConstraint(condition=Q(scope__in=BUDGET_SCOPES), name="token_usage_scope_known"),
            models.UniqueConstraint(fields=["scope", "subject", "shard"], name="token_usage_subject_shard"),
        ]
        # The dashboard's most-used trees and tasks of a tenant. A finish changes only
        # tokens, calls and updated_at, which no index holds: its UPDATE stays HOT.
        indexes = [models.Index(fields=["tenant", "scope"], name="token_usage_tenant_scope")]

    def __str__(self):
        return f"{self.scope} {self.subject}#{self.shard}: {self.tokens} tokens"


class Quota(models.Model):
    """An outside service's call quota for a tenant: at most `calls` admitted calls per
    fixed window of `window_seconds`, counted fleet-wide in Redis
    (runtime/limits/quotas.py). Configuration lives here; Redis only counts."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.CharField(max_length=100)
    service = models.CharField(max_length=100, help_text="The tool's name: /gateway/tools/<service>/...")
    calls = models.IntegerField()
    window_seconds = models.IntegerField()
    version = models.IntegerField(default=1)
    updated_by = models.CharField(max_length=200)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_quota"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "service"], name="quota_tenant_service"),
            models.CheckConstraint(condition=Q(calls__gte=0), name="quota_calls_nonnegative"),
            models.CheckConstraint(condition=Q(window_seconds__gte=1), name="quota_window_positive"),
        ]

    def __str__(self):
        return f"{self.tenant} {self.service}: {self.calls} per {self.window_seconds}s (v{self.version})"
