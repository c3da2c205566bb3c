"""`manage.py steward approvals list|show|approve|deny`: the approvals inbox from a
terminal. The same services as the console and the API; the actor must be a person
(`--actor user:<name>`: APPROVAL_REQUIRES_PERSON otherwise), and the person who started
the task cannot approve it (SELF_APPROVAL_REFUSED). As for grants (management/grants.py),
the CLI checks the actor's form, not their role: who runs manage.py holds the database."""

from __future__ import annotations

import json

from runtime import states
from runtime.approvals.selectors import ORDERS, approval_get, approvals_list
from runtime.approvals.services import approval_decide
from runtime.errors import InvalidArgument
from runtime.management.format import short, table, when

OPERATIONS = ("list", "show", "approve", "deny")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "approvals",
        help="list, show, approve and deny approval requests (people only)",
        description="list: pending, newest first (--order expiry: soonest to expire). show ID: "
        "the action laid out, what the digest covered, the taint summary. approve ID, "
        "deny ID: as --actor user:<name>, with --comment.",
    )
    p.add_argument("op", choices=OPERATIONS)
    p.add_argument("approval", nargs="?", help="the approval's id (show, approve, deny)")
    p.add_argument("--tenant", required=True)
    p.add_argument("--state", dest="approval_state", choices=states.APPROVAL_STATES, default=states.PENDING)
    p.add_argument("--agent", dest="approval_agent", help="only this agent's requests")
    p.add_argument("--order", choices=tuple(ORDERS), default="newest")
    p.add_argument("--comment", default="", help="why (kept with the decision and in its audit event)")


def run(out, *, actor, op, approval, tenant, approval_state, approval_agent, order, comment, **_) -> None:
    if op != "list" and not approval:
        raise InvalidArgument(f"approvals {op} needs the approval's id", field="approval")
    if op == "list":
        rows = approvals_list(tenant=tenant, state=approval_state, agent=approval_agent, order=order)
        out.write(
            table(
                ["id", "task", "agent", "effect", "untrusted", "expires", "state"],
                [
                    [
                        a.id,
                        a.task_id,
                        a.agent,
                        a.effect_class,
                        "yes" if a.untrusted else "-",
                        when(a.expires_at),
                        a.state,
                    ]
                    for a in rows
                ],
            )
        )
    elif op == "show":
        a = approval_get(approval_id=approval, tenant=tenant)
        out.write(f"approval {a.id} [{a.state}] of task {a.task_id} step {a.seq} ({a.name})\n")
        out.write(f"requested by {a.agent} for {a.owner} at {when(a.requested_at)}, expires {when(a.expires_at)}\n")
        out.write(f"effect class: {a.effect_class}\n")
        if a.untrusted:
            out.write(f"WARNING: the action holds text from a model or a tool at {', '.join(a.untrusted_paths)}\n")
        out.write("action:\n")
        for key, value in a.action.items() if isinstance(a.action, dict) else [("", a.action)]:
            out.write(f"  {key}: {short(json.dumps(value, ensure_ascii=False), 200)}\n")
        out.write(f"action hash: {a.action_hash}\ncontext digest: {a.context_digest}, covering:\n")
        for key, value in sorted(a.context.items()):
            out.write(f"  {key}: {short(json.dumps(value), 200)}\n")
        if a.decided_at:
            out.write(f"decided {when(a.decided_at)} by {a.decided_by or '-'}: {a.comment or '-'}\n")
        if a.stale_reason:
            out.write(f"stale: {a.stale_reason}\n")
    else:
        a = approval_decide(approval_id=approval, tenant=tenant, actor=actor, decision=op, comment=comment)
        out.write(f"{a.state} {a.id} (task {a.task_id} queued to act on it)")
