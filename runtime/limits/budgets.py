"""Token budgets and service quotas: what operators set (people only, audited, each
change a conditional write), and the reads the CLI, the API and the dashboard show.

The credential gateway enforces them: budgets in its admission statement
(runtime/sql/authz_decide.sql, `spent`), counted in its finish statement
(gateway_call_finish.sql); quotas in Redis before admission (runtime/limits/quotas.py).
docs/adr/0019-budgets.md says why there, and what each may overshoot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.db.models.functions import Now

from runtime import arguments
from runtime.audit import AuditKind, audit_append
from runtime.errors import BudgetRequiresPerson, InvalidArgument, InvalidIdentifier, QuotaNotFound, VersionConflict
from runtime.models import Budget, Quota, TokenUsage
from runtime.models.budget import BUDGET_SCOPES

# A budget of more than a quadrillion tokens is a typo; sums of counted usage stay far
# inside bigint below it.
TOKENS_MAX = 10**15
QUOTA_CALLS_MAX = 1_000_000
QUOTA_WINDOW_MAX = 86_400  # one day
VERSION_MAX = 2**31 - 1
LIMIT_FIELDS = tuple(f"{scope}_tokens" for scope in BUDGET_SCOPES)  # task_tokens, tree_tokens, tenant_tokens
SERVICE = re.compile(r"[a-z][a-z0-9_-]{0,62}")  # a tool's name, as console/gateway/urls.py routes it
PERSON = "user:"
NEAR = 0.9  # a budget this used reads "near its limit" and is marked for action


def _person(actor) -> str:
    """Budgets and quotas change only by a person's hand: an agent's token never reaches
    these services (the gateway has no route to them), and while agent code runs its
    connection may not write their tables at all (migration 0019)."""
    arguments.actor(actor)
    if not (actor.startswith(PERSON) and len(actor) > len(PERSON)):
        raise BudgetRequiresPerson(
            f"only a person (user:<name>) may change budgets and quotas, not {arguments.show(actor)}",
            actor=arguments.show(actor),
        )
    return actor


def _version(value) -> int | None:
    return None if value is None else arguments.bounded("version", value, minimum=0, maximum=VERSION_MAX)


def service_name(value) -> str:
    if not isinstance(value, str) or not SERVICE.fullmatch(value):
        raise InvalidIdentifier(
            f"service must be a tool's name (a-z, 0-9, _ and -, 1-63 characters), got {arguments.show(value)}",
            field="service",
        )
    return value


def budget_set(*, tenant: str, actor: str, version: int | None = None, reason: str = "", **limits) -> Budget:
    """Set some of a tenant's token budgets; each given as a count of tokens, or None
    for no budget of that scope. Limits not named stay as they were.

    1. Check the actor (a person), the tenant, each limit (0 to TOKENS_MAX; 0 denies
       every model call) and the version.
    2. One conditional UPDATE (version = the one read, when given) bumps the version; no
       row yet and version 0 or none: insert it (a concurrent insert is a conflict).
       A version that is not the current one is VERSION_CONFLICT and writes nothing.
    3. The budget.set audit row, with the limits before and after, in the same transaction.
    """
    _person(actor)
    arguments.tenant(tenant)
    arguments.text("reason", reason)
    version = _version(version)
    unknown = set(limits) - set(LIMIT_FIELDS)
    if unknown:
        raise InvalidArgument(
            f"a budget has {', '.join(LIMIT_FIELDS)}, not {', '.join(sorted(unknown))}", field=sorted(unknown)[0]
        )
    for name, value in limits.items():
        if value is not None:
            arguments.bounded(name, value, minimum=0, maximum=TOKENS_MAX)
    with transaction.atomic(durable=True):
        before, budget = _versioned_put(
            Budget,
            {"tenant": tenant},
            limits,
            read=LIMIT_FIELDS,
            actor=actor,
            version=version,
            what=f"tenant {tenant}'s budget",
        )
        audit_append(
            actor=actor,
            tenant=tenant,
            kind=AuditKind.BUDGET_SET,
            data={
                "before": {k: before[k] for k in LIMIT_FIELDS} if before else None,
                "after": {k: getattr(budget, k) for k in LIMIT_FIELDS},
                "version": budget.version,
                "why": reason,
            },
        )
        return budget


def quota_set(
    *,
    tenant: str,
    service: str,
    calls: int,
    window_seconds: int,
    actor: str,
    version: int | None = None,
    reason: str = "",
) -> Quota:
    """Set a tenant's quota for an outside service: at most `calls` calls per window of
    `window_seconds`, fleet-wide. The same steps as budget_set: check, one conditional
    UPDATE (or the insert of a new quota), the quota.set audit row."""
    _person(actor)
    arguments.tenant(tenant)
    service_name(service)
    arguments.text("reason", reason)
    arguments.bounded("calls", calls, minimum=0, maximum=QUOTA_CALLS_MAX)
    arguments.bounded("window_seconds", window_seconds, minimum=1, maximum=QUOTA_WINDOW_MAX)
    version = _version(version)
    with transaction.atomic(durable=True):
        before, quota = _versioned_put(
            Quota,
            {"tenant": tenant, "service": service},
            {"calls": calls, "window_seconds": window_seconds},
            read=("calls", "window_seconds"),
            actor=actor,
            version=version,
            what=f"the {service} quota",
        )
        audit_append(
            actor=actor,
            tenant=tenant,
            kind=AuditKind.QUOTA_SET,
            data={
                "service": service,
                "before": before and {k: before[k] for k in ("calls", "window_seconds")},
                "after": {"calls": calls, "window_seconds": window_seconds},
                "version": quota.version,
                "why": reason,
            },
        )
        return quota


def quota_remove(*, tenant: str, service: str, actor: str, version: int | None = None, reason: str = "") -> Quota:
    """Remove a tenant's quota for a service (its calls are then unlimited), audited;
    conditional on the version when given. QUOTA_NOT_FOUND if there is none. Returns
    the quota as it was."""
    _person(actor)
    arguments.tenant(tenant)
    service_name(service)
    arguments.text("reason", reason)
    version = _version(version)
    with transaction.atomic(durable=True):
        current = Quota.objects.filter(tenant=tenant, service=service).first()
        if current is None:
            raise QuotaNotFound(f"tenant {tenant} has no quota for {service}", service=service)
        rows = Quota.objects.filter(id=current.id, **({"version": version} if version is not None else {}))
        if rows.delete()[0] == 0:
            raise VersionConflict(
                f"the {service} quota is at version {current.version}, not {version}", current=current.version
            )
        audit_append(
            actor=actor,
            tenant=tenant,
            kind=AuditKind.QUOTA_REMOVED,
            data={"service": service, "calls": current.calls, "window_seconds": current.window_seconds, "why": reason},
        )
        return current


def _versioned_put(model, key: dict, values: dict, *, read, actor: str, version: int | None, what: str):
    """The write budget_set and quota_set share, on the caller's transaction: one
    UPDATE of the row at `key`, conditional on `version` when given, that bumps it; no
    row yet and version 0 or none: insert it (a concurrent insert is a conflict). A
    version that is not the current one is VERSION_CONFLICT and writes nothing. Returns
    the row's `read` fields and version before (None if there was none) and the row after.

    Conditional on the version read: a second operator's change in between wins there,
    and this one learns it (VERSION_CONFLICT), instead of undoing it."""
    before = model.objects.filter(**key).values(*read, "version").first()
    rows = model.objects.filter(**key)
    if version is not None:
        rows = rows.filter(version=version)
    if rows.update(**values, version=F("version") + 1, updated_by=actor, updated_at=Now()) == 0:
        current = before["version"] if before else 0
        if before is not None or version not in (None, 0):
            raise VersionConflict(f"{what} is at version {current}, not {version}", current=current)
        try:
            with transaction.atomic():
                model.objects.create(**key, **values, version=1, updated_by=actor)
        except IntegrityError:  # another operator created it first
            raise VersionConflict(f"{what} was just created by someone else", current=None) from None
    return before, model.objects.get(**key)


# --- reads ---------------------------------------------------------------------------


@dataclass
class Use:
    scope: str
    subject: str
    used: int
    limit: int | None

    @property
    def share(self) -> float | None:
        if self.limit is None:
            return None
        return 1.0 if self.limit == 0 else self.used / self.limit

    @property
    def percent(self) -> int | None:
        """The share used, in whole percent (capped at 999 for a display)."""
        return None if self.share is None else min(999, int(self.share * 100))

    @property
    def state(self) -> str:
        """In words: unlimited, within, near (at NEAR or more) or exhausted."""
        if self.limit is None:
            return "unlimited"
        if self.used >= self.limit:
            return "exhausted"
        return "near" if self.used >= NEAR * self.limit else "within"


@dataclass
class BudgetUse:
    tenant: str
    budget: Budget | None
    tenant_use: Use
    trees: list[Use]  # the trees that used the most, with the tree budget
    tasks: list[Use]  # the tasks that used the most, with the task budget
    quotas: list[Quota]


def budget_get(tenant: str) -> Budget | None:
    return Budget.objects.filter(tenant=arguments.tenant(tenant)).first()


def quota_list(tenant: str) -> list[Quota]:
    return list(Quota.objects.filter(tenant=arguments.tenant(tenant)).order_by("service"))


def budget_use(tenant: str, *, top: int = 5) -> BudgetUse:
    """A tenant's budgets and what was counted against them: the tenant's total, and the
    `top` trees and tasks that used the most (kept counts: a few index reads)."""
    budget = budget_get(tenant)

    def used(scope: str):
        return (
            TokenUsage.objects.filter(tenant=tenant, scope=scope)
            .values("subject")
            .annotate(used=Sum("tokens"))
            .order_by("-used")
        )

    total = sum(row["used"] for row in used("tenant"))
    return BudgetUse(
        tenant=tenant,
        budget=budget,
        quotas=quota_list(tenant),
        tenant_use=Use("tenant", tenant, total, budget and budget.tenant_tokens),
        trees=[Use("tree", r["subject"], r["used"], budget and budget.tree_tokens) for r in used("tree")[:top]],
        tasks=[Use("task", r["subject"], r["used"], budget and budget.task_tokens) for r in used("task")[:top]],
    )
