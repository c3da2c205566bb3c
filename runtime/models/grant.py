"""Grant and AuthzRevision: see runtime/models/__init__.py for what the models share, and
docs/adr/0013-authority-and-capability-tokens.md for why authority is read from these
rows on every check."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now


class Grant(models.Model):
    """A principal (`agent:<name>` or `user:<name>`) may take `action` on `resource` in
    `tenant` until `expires_at`. A resource is an exact value, or a prefix pattern ending
    in `*` (`repo:acme/*`; a lone `*` is every resource): prefix patterns are the only
    kind, so whether one grant is narrower than another is decidable by a prefix test.

    A grant only shrinks: it is narrowed in place (a narrower resource, an earlier expiry)
    or revoked, never widened; the values before a narrowing are in its audit event."""

    tenant = models.CharField(max_length=100)
    principal = models.CharField(max_length=200)
    action = models.CharField(max_length=100)
    resource = models.CharField(max_length=500)
    expires_at = models.DateTimeField(null=True, blank=True)
    granted_by = models.CharField(max_length=200)
    granted_at = models.DateTimeField(db_default=Now())
    narrowed_at = models.DateTimeField(null=True, blank=True)
    narrowed_by = models.CharField(max_length=200, blank=True, default="")
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=200, blank=True, default="")
    revoke_reason = models.CharField(max_length=2000, blank=True, default="")
    # The tenant's authz_revision this grant's last change made (create, narrow or
    # revoke): a token stamped with an older revision predates that change.
    revision = models.BigIntegerField()

    class Meta:
        db_table = "steward_grant"
        constraints = [
            models.CheckConstraint(
                condition=Q(principal__startswith="agent:") | Q(principal__startswith="user:"),
                name="grant_principal_is_agent_or_user",
            ),
            # Only people change grants (runtime/authz/services.py refuses the rest first;
            # this holds it against any other writer). The one exception gives, never
            # narrows or revokes: the demo's seed (grant_seed, debug only), so that what
            # it gives is never attributed to a person (migration 0023).
            models.CheckConstraint(
                condition=Q(granted_by__startswith="user:") | Q(granted_by="system:seed"),
                name="grant_granted_by_person_or_seed",
            ),
            models.CheckConstraint(
                condition=(
                    Q(revoked_at__isnull=True, revoked_by="")
                    | (Q(revoked_at__isnull=False) & Q(revoked_by__startswith="user:"))
                ),
                name="grant_revoked_by_person_with_time",
            ),
            models.CheckConstraint(
                condition=(
                    Q(narrowed_at__isnull=True, narrowed_by="")
                    | (Q(narrowed_at__isnull=False) & Q(narrowed_by__startswith="user:"))
                ),
                name="grant_narrowed_by_person_with_time",
            ),
            models.CheckConstraint(condition=Q(revision__gte=1), name="grant_revision_positive"),
        ]
        indexes = [
            # authorize() reads a principal's live grants for one action (runtime/sql/
            # authz_decide.sql); revoked rows never join that read, so they stay out.
            models.Index(
                fields=["tenant", "principal", "action"], condition=Q(revoked_at__isnull=True), name="grant_live"
            ),
            # The grants lists (runtime/authz/selectors.py), newest first.
            models.Index(fields=["tenant", "principal", "id"], name="grant_tenant_principal_id"),
            models.Index(fields=["tenant", "id"], name="grant_tenant_id"),
        ]

    def __str__(self):
        return f"{self.principal} {self.action} {self.resource} [{self.tenant}]"


class AuthzRevision(models.Model):
    """One monotonic counter per tenant, bumped in the same transaction as every grant
    change (runtime/sql/authz_bump.sql). Per tenant, not one row for all: the row lock
    that orders the bumps would otherwise serialise every tenant's grant changes."""

    tenant = models.CharField(max_length=100, primary_key=True)
    revision = models.BigIntegerField()
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_authz_revision"
        constraints = [models.CheckConstraint(condition=Q(revision__gte=1), name="authz_revision_positive")]

    def __str__(self):
        return f"{self.tenant} r{self.revision}"
