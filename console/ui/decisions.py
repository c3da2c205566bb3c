"""Every allow and deny of the tenant, newest first, filtered in the URL (task, outcome,
boundary, principal); a denial is marked and names the boundary that enforced it. Each
decision has its own page."""

from __future__ import annotations

from console.ui.web import NO_ROWS, kept, listing, page, param, screen
from runtime.authz.selectors import BOUNDARIES, decision_audit, decision_get, decisions_page
from runtime.errors import InvalidArgument

OUTCOMES = {"allowed": True, "denied": False}
FILTERS = ("task", "outcome", "boundary", "principal", "cursor")


@screen
def decision_list(request, principal):
    form = {"decisions": NO_ROWS, "filters": kept(request, FILTERS), "boundaries": BOUNDARIES}

    def read() -> dict:
        filters = {k: param(request, k) for k in FILTERS}
        if filters["outcome"] is not None and filters["outcome"] not in OUTCOMES:
            raise InvalidArgument("outcome must be allowed or denied", field="outcome")
        decisions = decisions_page(
            tenant=principal.tenant,
            task=filters["task"],
            allowed=OUTCOMES.get(filters["outcome"]),
            boundary=filters["boundary"],
            principal=filters["principal"],
            after=filters["cursor"],
            limit=50,
        )
        return {"decisions": decisions, "filters": filters}

    return listing(request, principal, "console/decisions.html", form, read, nav="decisions")


@screen
def decision_page(request, principal, decision_id):
    """One decision: who acted, on whose authority, in which task and attempt, at which
    boundary and revision, and (a denial) its audit row in the task's chain."""
    decision = decision_get(decision_id=decision_id, tenant=principal.tenant)
    return page(
        request,
        principal,
        "console/decision.html",
        {"decision": decision, "event": decision_audit(decision)},
        nav="decisions",
    )
