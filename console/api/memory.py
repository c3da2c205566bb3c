"""Agent memory, read-only: an agent's records in your tenant, and one record with its
history, provenance and taint (runtime/memory/, docs/adr/0039-agent-memory.md)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Router, Schema
from pydantic import Field, StringConstraints

from console.api.auth import principal
from console.api.errors import refuses
from console.api.schemas import Int, Page, PathName, cursor_query, limit_query, page_of
from runtime import states
from runtime.errors import InvalidInput, MemoryRecordNotFound
from runtime.memory.selectors import memory_page, memory_record

router = Router(tags=["memory"])

# A kind or a key, as runtime/memory/kinds.py takes them: printable, no "/".
MemoryKind = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[^\x00-\x1f\x7f/]+$")]
MemoryKey = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f/]+$")]
Source = Literal[states.MEMORY_SOURCES]
Validity = Literal["valid", "expired", "all"]


class Provenance(Schema):
    source: Source = Field(description="agent, model, tool or person: where the content came from")
    untrusted: bool = Field(description="written from a model's or a tool's text: data, never authority")
    task: uuid.UUID | None = Field(description="the task that wrote the content (none for a person's write)")
    attempt: int | None = Field(description="the attempt's epoch")
    step: int | None = Field(description="the journal step (seq) of the write")
    actor: str = Field(description="who made this version: agent:<name>, or a person")


class MemoryVersionOut(Schema):
    version: int
    schema_version: int
    change: Literal[states.MEMORY_CHANGES] = Field(description="write, upgrade or rollback")
    from_version: int | None = Field(description="upgrade or rollback: the version it carries")
    payload: Any = Field(description="the value; null once erased (its hash stays)")
    payload_hash: str = Field(description="sha256 of the payload's canonical JSON")
    erased: bool
    provenance: Provenance
    reason: str
    valid_from: datetime
    valid_until: datetime | None
    created_at: datetime


class MemoryOut(MemoryVersionOut):
    agent: str
    kind: str
    key: str


class MemoryDetailOut(Schema):
    record: MemoryOut = Field(description="the current version")
    valid: bool = Field(description="an agent reading it now gets it (inside its validity window)")
    history: list[MemoryVersionOut] = Field(description="every version, newest first (at most 200)")


def version_out(r) -> dict:
    return {
        "version": r.version,
        "schema_version": r.schema_version,
        "change": r.change,
        "from_version": r.from_version,
        "payload": r.payload,
        "payload_hash": r.payload_hash,
        "erased": r.payload is None,
        "provenance": {
            "source": r.source,
            "untrusted": r.untrusted,
            "task": r.task_id,
            "attempt": r.epoch,
            "step": r.seq,
            "actor": r.actor,
        },
        "reason": r.reason,
        "valid_from": r.valid_from,
        "valid_until": r.valid_until,
        "created_at": r.created_at,
    }


def memory_out(r) -> dict:
    return {**version_out(r), "agent": r.agent, "kind": r.kind, "key": r.key}


@router.get(
    "/agents/{name}/memory",
    response={200: Page[MemoryOut]},
    summary="An agent's memory records in your tenant, each at its current version",
)
@refuses(InvalidInput)
def list_memory(
    request,
    name: PathName,
    kind: MemoryKind | None = None,
    source: Source | None = None,
    untrusted: bool | None = None,
    validity: Validity = "valid",
    cursor: str | None = cursor_query(),
    limit: Int = limit_query(),
):
    """Most recently written first. `validity`: valid (what the agent would read now; the
    default), expired (past its window, or not yet in it), or all. A name with no records
    in your tenant is an empty page, whether or not the agent is registered here: memory
    outlives an agent's code."""
    page = memory_page(
        tenant=principal(request).tenant,
        agent=name,
        kind=kind,
        source=source,
        untrusted=untrusted,
        validity=validity,
        after=cursor,
        limit=limit,
    )
    return page_of(page, memory_out)


@router.get(
    "/agents/{name}/memory/{kind}/{key}",
    response={200: MemoryDetailOut},
    summary="One memory record: its current version, provenance and history",
)
@refuses(MemoryRecordNotFound, InvalidInput)
def memory_detail(request, name: PathName, kind: MemoryKind, key: MemoryKey):
    """MEMORY_RECORD_NOT_FOUND (404) if this agent has no such record in your tenant,
    another tenant's included."""
    detail = memory_record(tenant=principal(request).tenant, agent=name, kind=kind, key=key)
    return {
        "record": memory_out(detail.current),
        "valid": detail.valid,
        "history": [version_out(h) for h in detail.history],
    }
