"""`manage.py steward budgets|budget-set|quotas|quota-set|quota-remove`: token budgets and
service quotas from a terminal. The same services as the API; the actor must be a person
(`--actor user:<name>`: BUDGET_REQUIRES_PERSON otherwise), and `--version N` makes the
change only if the budget or quota is still at version N (VERSION_CONFLICT otherwise).

    budgets --tenant T
    budget-set --tenant T [--task-tokens N|none] [--tree-tokens N|none] [--tenant-tokens N|none]
    quotas --tenant T
    quota-set SERVICE --tenant T --calls N --window SECONDS
    quota-remove SERVICE --tenant T
"""

from __future__ import annotations

from runtime import arguments
from runtime.errors import ArgumentOutOfRange
from runtime.limits.budgets import TOKENS_MAX, budget_set, budget_use, quota_list, quota_remove, quota_set
from runtime.management.format import table, when

NONE = "none"


def tokens(value: str):
    """A count of tokens, or `none` for no budget of that scope."""
    if value == NONE:
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 16:
        raise ArgumentOutOfRange(
            f"a budget is a count of tokens from 0 to {TOKENS_MAX:g}, or none; got {arguments.show(value)}",
            field="tokens",
            min=0,
            max=TOKENS_MAX,
        )
    return int(value)


def add_parsers(sub) -> None:
    p = sub.add_parser("budgets", help="a tenant's token budgets, their use, and its service quotas")
    p.add_argument("--tenant", required=True)
    p = sub.add_parser("budget-set", help="set a tenant's token budgets (people only, audited)")
    p.add_argument("--tenant", required=True)
    for scope in ("task", "tree", "tenant"):
        p.add_argument(f"--{scope}-tokens", metavar="N|none", help=f"the {scope} budget; unchanged if not given")
    _conditional(p)
    p = sub.add_parser("quotas", help="a tenant's service quotas")
    p.add_argument("--tenant", required=True)
    p = sub.add_parser("quota-set", help="set a tenant's quota for an outside service (people only, audited)")
    p.add_argument("service", help="the tool's name, as in /gateway/tools/<name>/")
    p.add_argument("--tenant", required=True)
    p.add_argument("--calls", type=int, required=True, help="calls admitted per window")
    p.add_argument("--window", type=int, required=True, help="the window, in seconds")
    _conditional(p)
    p = sub.add_parser("quota-remove", help="remove a tenant's quota for a service (people only, audited)")
    p.add_argument("service")
    p.add_argument("--tenant", required=True)
    _conditional(p)


def _conditional(p) -> None:
    p.add_argument("--version", type=int, help="change only if still at this version (0: none yet)")
    p.add_argument("--reason", default="", help="why, for the audit trail")


def show(out, *, tenant, **_) -> None:
    use = budget_use(tenant)
    b = use.budget
    out.write(
        f"tenant {tenant}: budgets "
        + (f"v{b.version}, set by {b.updated_by} {when(b.updated_at)}" if b else "never set")
        + "\n"
    )
    rows = [
        [u.scope, u.subject, u.used, "none" if u.limit is None else u.limit, u.state]
        for u in [use.tenant_use, *use.trees, *use.tasks]
    ]
    out.write(table(["scope", "subject", "used", "budget", "state"], rows))
    quotas(out, tenant=tenant)


def set_budget(out, *, actor, tenant, task_tokens, tree_tokens, tenant_tokens, version, reason, **_) -> None:
    given = {
        name: tokens(value)
        for name, value in (
            ("task_tokens", task_tokens),
            ("tree_tokens", tree_tokens),
            ("tenant_tokens", tenant_tokens),
        )
        if value is not None
    }
    b = budget_set(tenant=tenant, actor=actor, version=version, reason=reason, **given)
    shown = [NONE if v is None else v for v in (b.task_tokens, b.tree_tokens, b.tenant_tokens)]
    out.write(f"budgets of {tenant} now v{b.version}: task {shown[0]}, tree {shown[1]}, tenant {shown[2]}")


def quotas(out, *, tenant, **_) -> None:
    out.write(
        table(
            ["service", "calls", "window", "version", "set by"],
            [[q.service, q.calls, f"{q.window_seconds}s", q.version, q.updated_by] for q in quota_list(tenant)],
        )
    )


def set_quota(out, *, actor, tenant, service, calls, window, version, reason, **_) -> None:
    q = quota_set(
        tenant=tenant, service=service, calls=calls, window_seconds=window, actor=actor, version=version, reason=reason
    )
    out.write(f"quota {q.service} of {tenant} now v{q.version}: {q.calls} calls per {q.window_seconds}s")


def remove_quota(out, *, actor, tenant, service, version, reason, **_) -> None:
    quota_remove(tenant=tenant, service=service, actor=actor, version=version, reason=reason)
    out.write(f"removed the {service} quota of {tenant}")
