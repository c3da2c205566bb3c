"""`manage.py steward grants list|show|preview|create|narrow|revoke`: grants from a
terminal. The same services as the console and the API; the actor must be a person
(`--actor user:<name>`: GRANT_REQUIRES_PERSON otherwise), and a narrowing or a
revocation needs a --reason, kept in its audit event.

Who may run manage.py holds the database already: the CLI is the operators' own shell,
so it checks the actor's form, not their role in the tenant (the web side does that,
console/access/rights.py, for people who reach Steward only through it)."""

from __future__ import annotations

from datetime import datetime

from runtime import arguments
from runtime.authz.selectors import GRANT_STATES, grant_get, grant_history, grants_filtered, revocation_preview
from runtime.authz.services import grant_create, grant_narrow, grant_revoke
from runtime.errors import ArgumentOutOfRange, InvalidArgument
from runtime.management.format import table, when

OPERATIONS = ("list", "show", "preview", "create", "narrow", "revoke")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "grants",
        help="list, create, narrow and revoke grants (people only)",
        description="list: newest first, filtered. show ID: one grant and its history. "
        "preview ID: the live tasks a narrowing or revocation reaches (the count its "
        "audit event records). create, narrow ID, revoke ID: as --actor user:<name>.",
    )
    p.add_argument("op", choices=OPERATIONS)
    p.add_argument("grant", nargs="?", type=int, help="the grant's id (show, preview, narrow, revoke)")
    p.add_argument("--tenant", required=True)
    p.add_argument("--principal", help="agent:<name> or user:<name>")
    p.add_argument("--action", dest="grant_action", help="what it allows, e.g. model.chat")
    p.add_argument("--resource", help="an exact value or a prefix pattern ending in *")
    p.add_argument("--expires", help="an ISO time with its offset (2026-12-31T18:00Z), in the future")
    p.add_argument("--state", choices=GRANT_STATES, default="live", help="list: live (default), revoked, ...")
    p.add_argument("--reason", help="why (required for narrow and revoke)")


def run(out, *, actor, op, grant, tenant, principal, grant_action, resource, expires, state, reason, **_) -> None:
    if op not in {"list", "create"} and grant is None:
        raise InvalidArgument(f"grants {op} needs the grant's id", field="grant")
    if grant is not None:
        arguments.bounded("grant", grant, minimum=1, maximum=2**63 - 1)
    if op == "list":
        rows = grants_filtered(tenant=tenant, principal=principal, action=grant_action, resource=resource, state=state)
        out.write(
            table(
                ["id", "principal", "action", "resource", "expires", "granted_by", "revoked", "revision"],
                [
                    [
                        g.id,
                        g.principal,
                        g.action,
                        g.resource,
                        when(g.expires_at),
                        g.granted_by,
                        when(g.revoked_at) if g.revoked_at else "-",
                        g.revision,
                    ]
                    for g in rows
                ],
            )
        )
    elif op == "show":
        g = grant_get(grant_id=grant, tenant=tenant)
        out.write(f"#{g.id} {g.principal} {g.action} on {g.resource}, expires {when(g.expires_at)}, r{g.revision}\n")
        out.write(
            table(
                ["audit", "at", "kind", "actor", "reason", "tasks"],
                [
                    [e.id, when(e.at), e.kind, e.actor, e.data.get("reason", ""), e.data.get("affected_tasks", "-")]
                    for e in grant_history(g)
                ],
            )
        )
    elif op == "preview":
        p = revocation_preview(tenant=tenant, grant_id=grant)
        out.write(
            f"{p.count} live task(s) act under {p.grant.principal} or below one that does; "
            f"{len(p.in_flight)} call(s) in flight; read at r{p.revision}. "
            "Effects already committed are not undone.\n"
        )
        out.write(table(["task", "agent", "status"], [[t.id, t.agent, t.status] for t in p.tasks]))
    elif op == "create":
        g = grant_create(
            tenant=tenant,
            principal=principal,
            action=grant_action,
            resource=resource,
            expires_at=_moment(expires),
            actor=actor,
        )
        out.write(f"granted #{g.id}: {g.principal} {g.action} on {g.resource} (r{g.revision})")
    elif op == "narrow":
        g = grant_narrow(
            grant_id=grant,
            tenant=tenant,
            resource=resource,
            expires_at=_moment(expires),
            actor=actor,
            reason=reason or "",
        )
        out.write(f"narrowed #{g.id}: {g.action} on {g.resource}, expires {when(g.expires_at)} (r{g.revision})")
    else:
        g = grant_revoke(grant_id=grant, tenant=tenant, actor=actor, reason=reason or "")
        event = grant_history(g)[-1]
        out.write(f"revoked #{g.id} (r{g.revision}); {event.data.get('affected_tasks', 0)} live task(s) reached")


def _moment(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(
            f"--expires must be an ISO time like 2026-12-31T18:00Z, got {arguments.show(value)}", field="expires"
        ) from None
    if moment.tzinfo is None:
        raise InvalidArgument(
            "--expires needs its offset (Z, +02:00): a time without one names no instant", field="expires"
        )
    try:
        moment.timestamp()
    except (OverflowError, OSError):
        raise ArgumentOutOfRange("--expires is out of range", field="expires") from None
    return moment
