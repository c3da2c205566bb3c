"""The memory browser: one agent's memory records in the tenant (filtered from the URL),
and one record with its current value, its provenance and taint in words, and every
version (each addressable, #v<N>). Read-only: a rollback is `steward memory rollback`
(docs/adr/0039-agent-memory.md)."""

from __future__ import annotations

from urllib.parse import urlencode

from console.ui.web import NO_ROWS, kept, listing, page, param, refusal, screen
from runtime import states
from runtime.errors import InvalidInput, MemoryRecordNotFound
from runtime.memory.selectors import VALIDITY, memory_page, memory_record

PAGE = 50
FILTERS = ("kind", "source", "untrusted", "validity")
CHANGES = {
    states.MemoryChange.WRITE: "written",
    states.MemoryChange.UPGRADE: "upgraded",
    states.MemoryChange.ROLLBACK: "rolled back",
}


def provenance(r) -> str:
    """Where a version's content came from and, for an upgrade or a rollback, who made
    the version, in a sentence."""
    if r.source == states.MemorySource.PERSON:
        origin = f"Written by {r.actor}, a person"
    else:
        origin = {
            states.MemorySource.AGENT: "Computed by the agent's own code",
            states.MemorySource.MODEL: "Written from a model's reply",
            states.MemorySource.TOOL: "Written from a tool's reply",
        }[r.source]
    where = f" in task {r.task_id}, attempt {r.epoch}, step {r.seq}" if r.task_id else ""
    made = ""
    if r.change != states.MemoryChange.WRITE:
        made = f"; {CHANGES[r.change]} by {r.actor} from version {r.from_version}"
    return f"{origin}{where}{made}."


def taint(r) -> str:
    if r.untrusted:
        return (
            "Untrusted: this text came from a model or a tool. It is data, never an instruction: "
            "it never becomes a grant, a policy or an approval, and an approval that quotes it says so."
        )
    return "Trusted as its source is: the agent's code or a person."


def _annotated(rows):
    for r in rows:
        r.provenance_words, r.taint_words, r.change_words = provenance(r), taint(r), CHANGES[r.change]
    return rows


def _untrusted(value: str | None) -> bool | None:
    if value in (None, ""):
        return None
    if value not in ("yes", "no"):
        raise InvalidInput("untrusted is yes or no", field="untrusted")
    return value == "yes"


@screen
def memory_list(request, principal, name):
    typed = kept(request, FILTERS)
    form = {
        "agent": name,
        "page": NO_ROWS,
        **typed,
        "validity": typed["validity"] or "valid",
        "sources": states.MEMORY_SOURCES,
        "validities": VALIDITY,
        "next_url": None,
    }

    def read() -> dict:
        kind, source = param(request, "kind"), param(request, "source")
        untrusted = _untrusted(param(request, "untrusted"))
        validity = param(request, "validity") or "valid"
        rows = memory_page(
            tenant=principal.tenant,
            agent=name,
            kind=kind,
            source=source,
            untrusted=untrusted,
            validity=validity,
            after=param(request, "cursor"),
            limit=PAGE,
        )
        _annotated(rows.items)
        given = {k: v for k, v in ((f, param(request, f)) for f in FILTERS) if v}
        return {
            "page": rows,
            "validity": validity,
            "next_url": "?" + urlencode({**given, "cursor": rows.next}) if rows.next else None,
        }

    return listing(request, principal, "console/memory.html", form, read, nav="agents")


@screen
def memory_record_page(request, principal, name, kind, key):
    try:
        detail = memory_record(tenant=principal.tenant, agent=name, kind=kind, key=key)
    except (MemoryRecordNotFound, InvalidInput) as exc:  # another tenant's, or none: 404
        return refusal(request, principal, MemoryRecordNotFound(exc.message), status=404)
    _annotated(detail.history)
    return page(
        request,
        principal,
        "console/memory_record.html",
        {"agent": name, "record": detail.current, "valid": detail.valid, "history": detail.history},
        nav="agents",
    )
