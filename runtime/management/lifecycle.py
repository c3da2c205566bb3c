"""`manage.py steward retention show|set|run` and `steward erase`: a tenant's retention
periods, the retention job, and erasure by subject, from a terminal. The same services
as the API and the console (runtime/lifecycle/).

    retention show --tenant T
    retention set --tenant T [--task-days N|none] [--gateway-days ...] [--memory-days ...]
                  [--decision-days ...] [--audit-days ...] --reason WHY
    retention run
    erase (--task ID | --owner O | --agent NAME | --tenant-wide) --tenant T [--preview] --reason WHY
"""

from __future__ import annotations

import json

from runtime import arguments
from runtime.errors import ArgumentOutOfRange, InvalidArgument
from runtime.lifecycle.selectors import PERIODS, erasure_preview, retention_get
from runtime.lifecycle.services import Subject, erasure_run, retention_run, retention_set
from runtime.management.format import table

NONE = "none"


def days(value: str | None, name: str):
    """A period in days, or `none` (kept)."""
    if value is None or value == NONE:
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 6:
        raise ArgumentOutOfRange(
            f"--{name.replace('_', '-')} is a number of days or none; got {arguments.show(value)}", field=name
        )
    return int(value)


def add_parsers(sub) -> None:
    p = sub.add_parser("retention", help="a tenant's retention periods; the retention job")
    p.add_argument("action", choices=["show", "set", "run"])
    p.add_argument("--tenant")
    for name in PERIODS:
        p.add_argument(f"--{name.replace('_', '-')}", metavar="N|none", help="days; none: kept (set: every period)")
    p.add_argument("--reason", default="", help="why, for the audit trail")
    p = sub.add_parser("erase", help="erase a subject's payloads from every place (signed receipt; audited)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--task", dest="erase_task", metavar="TASK_ID", help="a task and every task below it")
    which.add_argument("--owner", dest="erase_owner", metavar="ACTOR", help="every task run as this owner")
    which.add_argument("--agent", dest="erase_agent", metavar="NAME", help="an agent's memory in --tenant")
    which.add_argument("--tenant-wide", action="store_true", help="everything of --tenant")
    p.add_argument("--tenant", required=True)
    p.add_argument("--preview", action="store_true", help="say what it would erase; erase nothing")
    p.add_argument("--reason", default="", help="why (required to erase)")


def retention(out, *, actor, action, tenant, reason, **options) -> None:
    if action == "run":
        report = retention_run()
        out.write(json.dumps(report, sort_keys=True) + "\n")
        return
    if not tenant:
        raise InvalidArgument("--tenant is required", field="tenant")
    if action == "set":
        given = {name: days(options.get(name), name) for name in PERIODS}
        retention_set(tenant=tenant, actor=actor, reason=reason, **given)
    current = retention_get(tenant=tenant)
    out.write(f"tenant {tenant}: retention version {current['version']}\n")
    out.write(table(["period", "days"], [[p, NONE if current[p] is None else current[p]] for p in PERIODS]))


def erase(out, *, actor, tenant, erase_task, erase_owner, erase_agent, tenant_wide, preview, reason, **_) -> None:
    if erase_task:
        subject = Subject.of(kind="task", tenant=tenant, value=erase_task)
    elif erase_owner:
        subject = Subject.of(kind="owner", tenant=tenant, value=erase_owner)
    elif erase_agent is not None:
        subject = Subject.of(kind="agent", tenant=tenant, value=erase_agent)
    else:
        subject = Subject.of(kind="tenant", tenant=tenant)
    if preview:
        p = erasure_preview(subject=subject)
        out.write(f"would erase {p.rows} rows of {p.tasks} tasks ({subject.kind} {subject.value}):\n")
        out.write(table(["place", "rows"], [[k, v] for k, v in p.places.items()]))
        out.write(f"redis keys: {len(p.redis)}; exports: {len(p.exports)}\n")
        return
    receipt = erasure_run(subject=subject, actor=actor, reason=reason)
    out.write(f"erased {receipt.rows} rows: receipt {receipt.id}\n")
    out.write(json.dumps(receipt.body, sort_keys=True, indent=2) + "\n")
