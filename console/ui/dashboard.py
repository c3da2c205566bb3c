"""The dashboard: what is happening now and what needs a person, at a glance. Counts by
status, the live workers and what they hold, pools, the last hour's throughput and
dispatch latency of the tenant's tasks (and the whole fleet's totals for those who manage
it), and what waits for someone: effects, approvals, paused trees. The `live` fragment refreshes it
every 5 s while the tab is visible, with the last hour's totals and chart data out of
band (the charts redraw from them in place).

A refresh reads the version of what the dashboard shows first, in one statement
(dashboard_version: it moves with what the dashboard counts, and once a minute with the
clock), and answers 204 when it is the one the browser shows (`seen`, carried in the
fragment): an unchanged refresh reads nothing else. The broker's up or down is part of
the version too (a ping, not a statement): "not answering" shows at the next refresh."""

from __future__ import annotations

from django.http import HttpResponse
from django.utils import timezone

from console.ui.web import page, param, screen
from runtime import states
from runtime.approvals.selectors import SOON_SECONDS, approval_counts
from runtime.effects.selectors import effect_page
from runtime.fleet.selectors import dashboard_version, fleet, health, throughput
from runtime.limits.selectors import budget_use, open_pauses, pool_usage
from runtime.tasks.selectors import task_changes, task_counts
from runtime.versions.selectors import version_overview

PAUSES_SHOWN = 5


def _now(principal) -> dict:
    processes = fleet()  # seen within a day: alive, silent (no heartbeat within a lease) or stopped
    held = [a for p in processes for a in p.attempts]
    # Workers serve every tenant: the tasks of other tenants they hold are counted, not named.
    ours = task_changes(tenant=principal.tenant, ids=[a.task_id for a in held]).tasks
    counts = task_counts(tenant=principal.tenant)
    now = timezone.now()
    workers = [
        {
            "process": p.process,
            "alive": p.alive,
            "held": [
                {"attempt": a, "ours": str(a.task_id) in ours, "expired": a.lease_expires_at < now} for a in p.attempts
            ],
        }
        for p in processes
        if p.process.kind == "worker" and p.process.stopped_at is None
    ]
    return {
        "built_at": now,  # the server's clock, against which console.js counts the "ago" times
        "counts": [(s, counts[s]) for s in states.TASK_STATUSES],
        "live_total": sum(counts[s] for s in states.LIVE),
        "workers": workers,
        "stopped": sum(1 for p in processes if p.process.kind == "worker" and p.process.stopped_at is not None),
        "supervisors": [p for p in processes if p.process.kind == "supervisor"],
        "pools": pool_usage().items,
        "health": health(),
        "unknown": effect_page(tenant=principal.tenant, state=states.UNKNOWN, limit=10),
        "approvals": approval_counts(tenant=principal.tenant),
        **_pauses(principal.tenant),
        "budgets": _budgets(principal.tenant),
        **_versions(principal.tenant),
    }


def _versions(tenant: str) -> dict:
    """The tenant's unfinished tasks per agent version and the live workers serving each
    (the agents page's table); `versions_waiting` when any version's tasks wait for one.
    An upgrade moves no status, so the live refresh's version shows it within a minute."""
    rows = version_overview(tenant=tenant)
    # Only the agents where versions say something: more than one version known, or
    # unfinished tasks. An agent on one version with nothing unfinished is counted, not
    # listed (the agents page lists every one).
    by_agent: dict[str, list] = {}
    for row in rows:
        by_agent.setdefault(row.agent, []).append(row)
    shown = [r for group in by_agent.values() if len(group) > 1 or any(r.unfinished for r in group) for r in group]
    return {
        "versions": shown,
        "versions_quiet": len(by_agent) - len({r.agent for r in shown}),
        "versions_waiting": any(r.waiting for r in rows),
    }


def _pauses(tenant: str) -> dict:
    """The tenant's paused trees (the newest PAUSES_SHOWN), and whether there are more."""
    pauses = open_pauses(tenant=tenant, limit=PAUSES_SHOWN + 1)
    return {"pauses": pauses[:PAUSES_SHOWN], "pauses_more": len(pauses) > PAUSES_SHOWN}


def _budgets(tenant: str) -> dict:
    """The tenant's budget, then the trees and tasks that used the most, each with its
    state in words; `attention` when any is near its limit or exhausted."""
    use = budget_use(tenant)
    rows = [use.tenant_use, *use.trees, *use.tasks]
    return {
        "budget": use.budget,
        "quotas": use.quotas,
        "rows": rows,
        "attention": any(u.state in ("near", "exhausted") for u in rows),
    }


def _version(principal) -> str:
    # Read before what it stands for: it can only be older than the view, and the next
    # refresh then builds the view again.
    return dashboard_version(tenant=principal.tenant, fleet_totals=principal.manages_fleet, soon_seconds=SOON_SECONDS)


@screen
def dashboard(request, principal):
    version = _version(principal)
    return page(
        request,
        principal,
        "console/dashboard.html",
        {**_now(principal), **_last_hour(principal), "version": version},
        nav="dashboard",
    )


@screen
def dashboard_live(request, principal):
    """The `now` partial, and the last hour's totals and chart data out of band; 204
    when the version the browser shows is the current one."""
    version = _version(principal)
    if version == param(request, "seen"):
        return HttpResponse(status=204)
    return page(
        request,
        principal,
        "console/dashboard.html#live",
        {**_now(principal), **_last_hour(principal), "oob": True, "version": version},
    )


def _last_hour(principal) -> dict:
    """The principal's tenant's last hour: its totals and its charts. The whole fleet's
    totals beside them only for those who manage the fleet (Principal.manages_fleet):
    every tenant's work, summed, is not a tenant's to read."""
    minutes = throughput(minutes=60, tenant=principal.tenant)
    fleet_hour = _totals(throughput(minutes=60)) if principal.manages_fleet else None
    return {**_chart(minutes), "hour": _totals(minutes), "fleet_hour": fleet_hour}


def _totals(minutes) -> dict:
    return {
        "finished": sum(m.finished for m in minutes),
        "failed": sum(m.failed for m in minutes),
        "steps": sum(m.steps for m in minutes),
    }


def _chart(minutes) -> dict:
    chart = {
        "t": [int(m.minute.timestamp()) for m in minutes],
        "finished": [m.finished for m in minutes],
        "failed": [m.failed for m in minutes],
        "steps": [m.steps for m in minutes],
        "p50": [_ms(m.wait_quantile(0.5)) for m in minutes],
        "p95": [_ms(m.wait_quantile(0.95)) for m in minutes],
    }
    return {"chart": chart}


def _ms(seconds):
    return None if seconds is None or seconds == float("inf") else round(seconds * 1000, 1)
