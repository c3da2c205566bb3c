"""`manage.py steward memory list|show|upgrade|rollback`: agent memory (runtime/memory/,
docs/adr/0039-agent-memory.md).

    memory list AGENT --tenant T [--kind K] [--validity valid|expired|all]
    memory show AGENT KIND KEY --tenant T          the record, its provenance and history
    memory upgrade [--tenant T] [--agent A] [--kind K]
    memory rollback AGENT KIND KEY VERSION --tenant T --reason R

`upgrade` carries every current record below its kind's schema version to the current
one, each as a new version with an audit row (agents also do it lazily as they read).
`rollback` makes VERSION current again, as a new version, and prints the effects this
agent committed since VERSION was written: a rollback cannot undo them."""

from __future__ import annotations

from runtime import arguments
from runtime.errors import InvalidArgument
from runtime.management.format import table, when
from runtime.memory.selectors import VALIDITY, memory_page, memory_record
from runtime.memory.services import memory_rollback, memory_upgrade_all

OPERATIONS = ("list", "show", "upgrade", "rollback")
PAGE = 100


def add_parser(sub) -> None:
    p = sub.add_parser("memory", help="agent memory: list, show, upgrade, rollback")
    p.add_argument("op", choices=OPERATIONS)
    p.add_argument("subject", nargs="*", help="list: AGENT; show: AGENT KIND KEY; rollback: AGENT KIND KEY VERSION")
    p.add_argument("--tenant", help="the tenant (required but for upgrade)")
    p.add_argument("--agent", dest="memory_agent", help="upgrade: only this agent's records")
    p.add_argument("--kind", help="list, upgrade: only this kind")
    p.add_argument("--validity", choices=VALIDITY, default="valid", help="list: which records")
    p.add_argument("--reason", default="", help="rollback: why, for the audit trail")


def _provenance(r) -> str:
    where = f"task {r.task_id} attempt {r.epoch} step {r.seq}" if r.task_id else "no task"
    return f"{r.source}{' (untrusted)' if r.untrusted else ''}, {where}, by {r.actor}"


def run(out, *, actor, op, subject, tenant, memory_agent, kind, validity, reason, **_) -> None:
    if op == "upgrade":
        report = memory_upgrade_all(actor=actor, tenant=tenant, agent=memory_agent, kind=kind)
        out.write(f"upgraded {report.upgraded}; changed meanwhile {report.lost}; erased {report.erased}\n")
        return
    if tenant is None:
        raise InvalidArgument(f"memory {op} needs --tenant", field="tenant")
    tenant = arguments.tenant(tenant)
    wanted = {"list": 1, "show": 3, "rollback": 4}[op]
    if len(subject) != wanted:
        raise InvalidArgument(f"memory {op} takes {wanted} argument(s)", field="subject")
    if op == "list":
        page = memory_page(tenant=tenant, agent=subject[0], kind=kind, validity=validity, limit=PAGE)
        rows = [[r.kind, r.key, r.version, r.schema_version, _provenance(r), when(r.created_at)] for r in page]
        out.write(table(["kind", "key", "version", "schema", "provenance", "written"], rows))
        return
    if op == "show":
        detail = memory_record(tenant=tenant, agent=subject[0], kind=subject[1], key=subject[2])
        state = "valid" if detail.valid else "expired or not yet valid"
        out.write(f"{subject[1]}/{subject[2]} v{detail.current.version} ({state})\n")
        rows = [
            [
                h.version,
                h.change,
                h.schema_version,
                _provenance(h),
                "erased" if h.payload is None else h.payload_hash[:12],
            ]
            for h in detail.history
        ]
        out.write(table(["version", "change", "schema", "provenance", "payload"], rows))
        return
    try:
        version = int(subject[3])
    except ValueError:
        raise InvalidArgument("VERSION is a number", field="version") from None
    done = memory_rollback(
        tenant=tenant, agent=subject[0], kind=subject[1], key=subject[2], version=version, actor=actor, reason=reason
    )
    out.write(f"v{done.restored.version} is current again as v{done.record.version}\n")
    if done.effects:
        out.write(f"Effects since v{done.restored.version}, which a rollback cannot undo:\n")
        out.write(
            table(
                ["effect", "task", "name", "state", "at"],
                [[e.id, e.task_id, e.name, e.state, when(e.created_at)] for e in done.effects],
            )
        )
    else:
        out.write(f"No effect of {subject[0]} since v{done.restored.version}.\n")
