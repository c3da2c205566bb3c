"""The audit trail: a tenant's events filtered (fields in the URL, or GitHub-style
qualifiers in one box: `actor:user:alice kind:task.cancelled since:2026-12-01`), each
event with its place in its hash chain, an export of exactly the current filter, and a
verify button that recomputes the chains and checks the seals."""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

from django.http import StreamingHttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from console.ui.web import NO_ROWS, kept, listing, page, param, screen, when
from runtime.trail.selectors import (
    audit_export_line,
    audit_get,
    audit_iter,
    audit_page,
    audit_seals,
    audit_subjects,
)
from runtime.trail.services import audit_check

FIELDS = ("actor", "task", "kind", "since", "until")


def filters_of(request) -> dict:
    """The filters: each field, else its qualifier in `q` (a field given wins)."""
    found = dict.fromkeys(FIELDS)
    for word in (param(request, "q") or "").split():
        name, colon, value = word.partition(":")
        if colon and name in found and value:
            found[name] = value
    for name in FIELDS:
        found[name] = param(request, name) or found[name]
    return found


def _query(principal, shown: dict) -> dict:
    return {
        "tenant": principal.tenant,
        "task": shown["task"],
        "actor": shown["actor"],
        "kind": shown["kind"],
        "since": when(shown["since"], "since"),
        "until": when(shown["until"], "until"),
    }


@screen
def audit_list(request, principal):
    typed = kept(request, (*FIELDS, "q"))
    # The filters as typed, each field else its qualifier in `q`, as filters_of reads them.
    words = dict(w.partition(":")[::2] for w in typed["q"].split() if ":" in w)
    shown_typed = {name: typed[name] or words.get(name) or None for name in FIELDS}
    given_typed = {k: v for k, v in shown_typed.items() if v}
    form = {
        "page": NO_ROWS,
        "filters": shown_typed,
        "given": given_typed,
        "q": typed["q"],
        "next_url": None,
        "export_url": reverse("ui:audit-export"),
    }

    def read() -> dict:
        shown = filters_of(request)
        events = audit_page(**_query(principal, shown), after=param(request, "cursor"), limit=50)
        given = {k: v for k, v in shown.items() if v}
        return {
            "page": events,
            "filters": shown,
            "given": given,
            "q": param(request, "q") or "",
            "next_url": "?" + urlencode({**given, "cursor": events.next}) if events.next else None,
            "export_url": reverse("ui:audit-export") + ("?" + urlencode(given) if given else ""),
        }

    return listing(request, principal, "console/audit.html", form, read, nav="audit")


@screen
def audit_event(request, principal, event_id):
    event = audit_get(event_id, tenant=principal.tenant)
    subjects = [(s, reverse(SUBJECT_ROUTES[s.kind], args=[s.id])) for s in audit_subjects(event)]
    return page(request, principal, "console/audit_event.html", {"event": event, "subjects": subjects}, nav="audit")


# Each kind of object an event names, and its page.
SUBJECT_ROUTES = {
    "grant": "ui:grant",
    "effect": "ui:effect",
    "approval": "ui:approval",
    "decision": "ui:decision",
    "stop": "ui:stop",
    "schedule": "ui:schedule",
    "webhook": "ui:webhook",
    "task": "ui:task",
}


@screen
def audit_export(request, principal):
    """Exactly the events the list shows for these filters, every page of them, one JSON
    object a line, each with its chain position (the hashes verify offline)."""
    query = _query(principal, filters_of(request))
    events = audit_iter(**query)
    first = next(events, None)  # a bad filter is refused now, as a page, not mid-stream

    def lines():
        if first is not None:
            yield audit_export_line(first)
            for event in events:
                yield audit_export_line(event)

    response = StreamingHttpResponse(lines(), content_type="application/x-ndjson; charset=utf-8")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    response["Content-Disposition"] = f'attachment; filename="steward-audit-{principal.tenant}-{stamp}.jsonl"'
    return response


@require_POST
@screen
def audit_verify_view(request, principal):
    """Recompute every hash and link of this tenant's chains and check its seals
    (audit_check). Reading, not acting: a viewer may verify too."""
    check = audit_check(tenant=principal.tenant)
    bad = check.first_bad
    context = {
        "check": check,
        "bad": bad,
        "problems": check.seals,
        "rows": check.rows,
        "seconds": check.seconds,
        "ok": check.ok,
        "tampered": len(check.tampered),
    }
    template = "console/audit.html#verify-result" if request.htmx else "console/audit_verified.html"
    return page(request, principal, template, context, nav="audit")


@screen
def audit_seals_export(request, principal):
    """The tenant's seals, oldest first, one JSON object a line: a copy to keep outside the
    database, so a seal later deleted from the table is still known."""
    response = StreamingHttpResponse(
        (json.dumps(seal, sort_keys=True) + "\n" for seal in audit_seals(tenant=principal.tenant)),
        content_type="application/x-ndjson; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="steward-seals-{principal.tenant}.jsonl"'
    return response
