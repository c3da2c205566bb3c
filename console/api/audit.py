"""The audit trail: query it, export exactly that query as JSONL, verify it."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.http import StreamingHttpResponse
from ninja import Path, Router, Schema
from pydantic import Field

from console.api.auth import principal
from console.api.errors import refuses
from console.api.schemas import MAX_LIMIT, Int, Moment, Name, Page, Uuid, cursor_query, limit_query, page_of
from runtime.errors import AuditEventNotFound, InvalidInput, TaskNotFound
from runtime.trail.selectors import audit_export_line, audit_get, audit_iter, audit_page
from runtime.trail.services import audit_check

router = Router(tags=["audit"])

SHOWN_PROBLEMS = 100  # a trail tampered with at scale is named by its first rows, not all


class AuditEventOut(Schema):
    id: int
    at: datetime
    actor: str
    tenant: str
    task: uuid.UUID | None
    kind: str
    data: dict[str, Any] = Field(description="what happened; `via` names the channel and credential")
    chain: str = Field(description="the hash chain it is in: task:<id>, or tenant:<name>")
    chain_seq: int = Field(description="its position in that chain, from 1")
    prev_hash: str = Field(description="hex sha256 of the row before it in the chain ('' for the first)")
    hash: str = Field(description="hex sha256 of this row, over prev_hash and its content")


class BadRow(Schema):
    id: int
    chain: str
    chain_seq: int
    problem: str = Field(
        description="hash: its content changed; link: a row before it changed or vanished; "
        "gap: the chain skips a sequence number"
    )
    message: str


class SealIssue(Schema):
    problem: str = Field(description="seal: the seal chain itself; missing / changed: a sealed chain head")
    message: str
    chain: str
    chain_seq: int | None
    seal: int | None


class Verified(Schema):
    ok: bool
    rows_checked: int = Field(description="rows whose hash and link were recomputed: the tenant's whole trail")
    seconds: float
    first_bad: BadRow | None
    bad_rows: list[BadRow] = Field(description=f"this tenant's tampered rows, by id (the first {SHOWN_PROBLEMS})")
    seal_problems: list[SealIssue] = Field(description="what the seals show: newest rows or whole chains gone")


def audit_out(event) -> dict:
    return {
        "id": event.id,
        "at": event.at,
        "actor": event.actor,
        "tenant": event.tenant,
        "task": event.task_id,
        "kind": event.kind,
        "data": event.data,
        "chain": event.chain,
        "chain_seq": event.chain_seq,
        "prev_hash": bytes(event.prev_hash).hex(),
        "hash": bytes(event.hash).hex(),
    }


def bad_out(bad) -> dict:
    return {"id": bad.id, "chain": bad.chain, "chain_seq": bad.chain_seq, "problem": bad.problem, "message": str(bad)}


@router.get("/audit", response={200: Page[AuditEventOut]}, summary="Query the audit trail, newest first")
@refuses(InvalidInput, TaskNotFound)
def list_events(
    request,
    actor: Name | None = None,
    task: Uuid | None = None,
    kind: Name | None = None,
    since: Moment | None = None,
    until: Moment | None = None,
    cursor: str | None = cursor_query(),
    limit: Int = limit_query(),
):
    """`since` is inclusive, `until` exclusive. With `task`, that task's chain in order; a
    `task` that names no task of yours is TASK_NOT_FOUND (404)."""
    page = audit_page(
        tenant=principal(request).tenant,
        task=task,
        actor=actor,
        kind=kind,
        since=since,
        until=until,
        after=cursor,
        limit=limit,
    )
    return page_of(page, audit_out)


@router.get(
    "/audit/export",
    response={200: str},
    summary="Export a query of the audit trail as JSONL",
    openapi_extra={
        "responses": {
            200: {
                "description": "one event per line, as in GET /audit",
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
            }
        }
    },
)
@refuses(TaskNotFound)
def export(
    request,
    actor: Name | None = None,
    task: Uuid | None = None,
    kind: Name | None = None,
    since: Moment | None = None,
    until: Moment | None = None,
):
    """Exactly the events GET /audit would page through with the same filters, newest
    first, each with its hash-chain position (chain, chain_seq, prev_hash, hash), so a
    copy kept elsewhere can be re-verified. Streamed page by page: memory stays flat
    however long the trail; events written after the export began are not in it."""
    tenant = principal(request).tenant
    events = audit_iter(tenant=tenant, task=task, actor=actor, kind=kind, since=since, until=until, batch=MAX_LIMIT)
    first = next(events, None)  # read before answering: a bad filter is a 4xx, not a cut stream

    def lines():
        if first is not None:
            yield audit_export_line(first)
            yield from map(audit_export_line, events)

    response = StreamingHttpResponse(lines(), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="audit-{tenant}.jsonl"'
    return response


@router.post("/audit/verify", response={200: Verified}, summary="Verify the audit trail and its seals")
def verify(request):
    """Recompute every hash and link of the tenant's chains and check its seals; names
    its first bad row. It writes nothing, so, as in the console, every member may verify
    (a read token too): the evidence that the trail held is for whoever reviews it."""
    check = audit_check(tenant=principal(request).tenant)
    bad = [bad_out(b) for b in check.tampered[:SHOWN_PROBLEMS]]
    return {
        "ok": check.ok,
        "rows_checked": check.rows,
        "seconds": round(check.seconds, 3),
        "first_bad": bad[0] if bad else None,
        "bad_rows": bad,
        "seal_problems": [
            {"problem": p.problem, "message": str(p), "chain": p.chain, "chain_seq": p.chain_seq, "seal": p.seal}
            for p in check.seals[:SHOWN_PROBLEMS]
        ],
    }


@router.get("/audit/{event_id}", response={200: AuditEventOut}, summary="One audit event")
@refuses(AuditEventNotFound)
def detail(request, event_id: Int = Path(..., ge=1, le=2**63 - 1)):
    return audit_out(audit_get(event_id, tenant=principal(request).tenant))
