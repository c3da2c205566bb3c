"""People on the web side: tenants, who belongs to which with what role, and their API
tokens. The runtime knows a tenant only as the slug on its rows and a person as an actor
string ("user:alice"); who may see and do what is decided in console/access/.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)  # each may do what the ones before it may, and more
READ, OPERATE = "read", "operate"
SCOPES = (READ, OPERATE)


class Tenant(models.Model):
    """A tenant: the slug every runtime row carries (Task.tenant, AuditEvent.tenant)."""

    slug = models.SlugField(primary_key=True, max_length=100)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_tenant"

    def __str__(self):
        return self.name or self.slug


class Membership(models.Model):
    """A person's role in a tenant. A person may belong to several tenants."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=[(r, r) for r in ROLES])
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_membership"
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="membership_one_per_tenant"),
            models.CheckConstraint(condition=Q(role__in=ROLES), name="membership_role_known"),
        ]

    def __str__(self):
        return f"{self.user} is {self.role} of {self.tenant_id}"


class ApiToken(models.Model):
    """A bearer token for the HTTP API, for one person in one tenant.

    The secret is shown once, when the token is made, and only its sha256 is kept: a
    token is 32 random bytes, so a fast hash is as good as a slow one, and checking it
    costs a single indexed lookup per request. `prefix` (the first characters, public)
    names it in lists and audit rows.
    """

    prefix = models.CharField(max_length=16, unique=True)
    digest = models.BinaryField(max_length=32, unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=16, choices=[(s, s) for s in SCOPES])
    created_at = models.DateTimeField(db_default=Now())
    created_by = models.CharField(max_length=200)
    expires_at = models.DateTimeField(null=True, blank=True)
    # Written at most once a minute (console/access/tokens.py): a write per request would cost
    # every API call a commit.
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        db_table = "steward_api_token"
        constraints = [models.CheckConstraint(condition=Q(scope__in=SCOPES), name="api_token_scope_known")]
        indexes = [models.Index(fields=["tenant", "user"], name="api_token_by_owner")]

    def __str__(self):
        return f"{self.prefix}… {self.name} ({self.scope})"


# The django-guardian object permission that lets an operator change one agent's grants
# (console/access/rights.py may_change_grants). Admins need none: they change every grant.
CHANGE_AGENT_GRANTS = "change_agent_grants"
# Once any operator holds this on an agent's identity, only they (and admins) approve
# that agent's requests in the tenant; until then every operator may (console/access/rights.py).
APPROVE_AGENT_REQUESTS = "approve_agent_requests"


class AgentIdentity(models.Model):
    """An agent as a principal of one tenant (`agent:<name>` on its grants): the object an
    admin gives an operator the right over (a guardian object permission), so that right
    is per agent *and* per tenant, never "this agent everywhere".

    Made when first needed (an admin delegating it, or the demo seed), never on a page
    read; the console lists every registered agent whether or not its row exists yet."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_agent_identity"
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="agent_identity_one_per_tenant")]
        permissions = [
            (CHANGE_AGENT_GRANTS, "May narrow, revoke and create this agent's grants"),
            (APPROVE_AGENT_REQUESTS, "May approve this agent's approval requests"),
        ]

    def __str__(self):
        return f"agent:{self.name} of {self.tenant_id}"

    @property
    def principal(self) -> str:
        return f"agent:{self.name}"
