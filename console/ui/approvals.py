"""The approvals inbox: every request of the tenant (pending by default, newest or
soonest to expire first, filters in the URL), one request on its own URL with its action
laid out, and approve or deny with a comment (two clicks: open it, press the button).

A request decided elsewhere or found stale while the page was open is shown as such;
pressing approve then is refused by the runtime with the reason (APPROVAL_ALREADY_DECIDED
names the state and who decided), and the page says so. An approve that finds what the
request is bound to changed since the agent asked (APPROVAL_STALE: the authz_revision,
the policy_version, the input digest) shows the request as stale, as the executor would
have left it. A stale request's page names each part that changed, before and after, by
the words an operator reads it by (package.BOUND), whether an approve or the executor's
re-check found it (the approval.stale audit row keeps what the 409 said).

The inbox is live without moving what the person reads. The page is a snapshot: it
records the newest request matching its filters (`snapshot`), and its live fragment
(`/approvals/live/`, every 2 s while the tab shows) gets the rows on screen whose words
may still change (pending, approved), each with the state it shows (`row=<id>.<state>`).
It answers 204 when none moved and the count of new requests is the one shown (one
statement: runtime.approvals.selectors.approvals_moved); otherwise the "N new — show"
bar, in a room the page keeps for it so that nothing moves when it shows, and each moved
row again, morphed in place by id. A decided, expired or stale request says so where it
stands and stays until the person reloads: never removed, never reordered, under
`state=pending` too.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from console.access import OPERATE_ACTION, acting, require, require_approval_right
from console.ui.web import form_status, kept, listing, page, param, screen
from runtime import states
from runtime.approvals.package import BOUND
from runtime.approvals.selectors import (
    NEW_COUNTED_MAX,
    ORDERS,
    approval_changes,
    approval_get,
    approval_newest_id,
    approvals_list,
    approvals_moved,
    approvals_of_task,
)
from runtime.approvals.services import approval_decide
from runtime.errors import StewardError
from runtime.tasks.actions import task_actions
from runtime.tasks.selectors import agent_list, steps_journaled, task_get

FILTERS = ("state", "order", "agent")
NIL = "00000000-0000-0000-0000-000000000000"  # the snapshot of an empty inbox: every request is new


def _filters(request) -> dict:
    """The filters as the page reads them: pending and newest unless given."""
    return {
        "state": param(request, "state") or states.PENDING,
        "order": param(request, "order") or "newest",
        "agent": param(request, "agent"),
    }


def _state(filters: dict) -> str | None:
    return None if filters["state"] == "any" else filters["state"]


def _urls(filters: dict, snapshot: str | None) -> dict:
    given = {k: v for k, v in filters.items() if v}
    return {
        "query": urlencode(given),
        "live_url": reverse("ui:approvals-live")
        + "?"
        + urlencode({**given, **({"snapshot": snapshot} if snapshot else {})}),
        "fresh_url": reverse("ui:approvals") + "?" + urlencode(given),
    }


@screen
def approval_list(request, principal):
    typed = kept(request, FILTERS)
    form = {
        "rows": [],
        "newer": 0,
        "state": typed["state"] or states.PENDING,
        "order": typed["order"] or "newest",
        "agent": typed["agent"],
        "states": states.APPROVAL_STATES,
        "orders": tuple(ORDERS),
        "agents": [a.name for a in agent_list()],
    }

    def read() -> dict:
        filters = _filters(request)
        rows = approvals_list(
            tenant=principal.tenant, state=_state(filters), agent=filters["agent"], order=filters["order"], limit=200
        )
        # The newest request the page could show: newest first, its first row; soonest to
        # expire first, read apart (a later request may expire sooner, and sit lower).
        newest = (
            rows[0].id
            if rows and filters["order"] == "newest"
            else approval_newest_id(tenant=principal.tenant, state=_state(filters), agent=filters["agent"])
        )
        return {"rows": rows, **filters, **_urls(filters, str(newest) if newest else NIL)}

    return listing(request, principal, "console/approvals.html", form, read, nav="approvals")


@screen
def approval_list_live(request, principal):
    filters = _filters(request)
    on_screen = dict(row.partition(".")[::2] for row in request.GET.getlist("row"))
    snapshot = param(request, "snapshot")
    moved = approvals_moved(
        tenant=principal.tenant,
        ids=list(on_screen),
        newer_than=snapshot,
        state=_state(filters),
        agent=filters["agent"],
    )
    changed = [key for key, state in moved.states.items() if on_screen.get(key) != state]
    if not changed and str(moved.newer) == (param(request, "newer") or "0"):
        return HttpResponse(status=204)  # nothing moved: htmx leaves the page alone
    return page(
        request,
        principal,
        "console/approvals.html#live",
        {
            "moved": approvals_list(tenant=principal.tenant, state=None, ids=changed) if changed else [],
            "newer": moved.newer,
            "capped": moved.newer >= NEW_COUNTED_MAX,
            **_urls(filters, snapshot),
        },
    )


@screen
def approval_detail(request, principal, approval_id):
    approval = approval_get(approval_id=approval_id, tenant=principal.tenant)
    return page(request, principal, "console/approval.html", _context(approval), nav="approvals")


def _decide(request, principal, approval_id, decision: str):
    approval = approval_get(approval_id=approval_id, tenant=principal.tenant)  # another tenant's: 404
    if request.method != "POST":
        return redirect("ui:approval", approval.id)
    require(principal, OPERATE_ACTION)
    comment = param(request, "comment", request.POST) or ""
    try:
        require_approval_right(principal, approval.agent)
        with acting(principal):
            approval_decide(
                approval_id=approval.id,
                tenant=principal.tenant,
                actor=principal.actor,
                decision=decision,
                comment=comment,
            )
    except StewardError as exc:
        approval.refresh_from_db()
        return page(
            request,
            principal,
            "console/approval.html",
            _context(approval, comment=comment, error=exc),
            status=form_status(exc),
            nav="approvals",
        )
    messages.success(
        request,
        "Approved: the task goes on, once the executor has checked that nothing changed."
        if decision == "approve"
        else "Denied: the task goes on with its denial branch.",
    )
    return redirect("ui:approval", approval.id)


@screen
def approve(request, principal, approval_id):
    return _decide(request, principal, approval_id, "approve")


@screen
def deny(request, principal, approval_id):
    return _decide(request, principal, approval_id, "deny")


def _context(approval, *, comment: str = "", error=None) -> dict:
    action = approval.action if isinstance(approval.action, dict) else {"(action)": approval.action}
    task = task_get(approval.task_id)
    # Plain values first, then the nested ones: a tall JSON block leading the grid pushed
    # what the action is (its op, its target) out of the first line.
    laid_out = sorted(
        ((key, value, isinstance(value, (dict, list))) for key, value in action.items()),
        key=lambda item: (item[2], item[0]),
    )
    # A stale request is never approvable again; the agent may have asked anew.
    asked_again = (
        [a for a in approvals_of_task(task_id=approval.task_id) if a.seq > approval.seq]
        if approval.state == states.STALE
        else []
    )
    # What it went stale against: the refused approve's APPROVAL_STALE says so, and the
    # approval.stale audit row keeps the same for every later look.
    changed = (error.details.get("changed") if error is not None else None) or approval_changes(approval=approval)
    return {
        "approval": approval,
        "task": task,
        "step_journaled": bool(steps_journaled([(approval.task_id, approval.seq)])),
        "arguments": laid_out,
        "asked_again": asked_again,
        # Each bound part under its operator-facing name, with its key (package.BOUND).
        "context_items": [(key, BOUND.get(key), value) for key, value in sorted((approval.context or {}).items())],
        "changed": [
            (key, BOUND.get(key), change.get("before"), change.get("after")) for key, change in sorted(changed.items())
        ],
        "comment": comment,
        "error": error,
        "decidable": approval.state == states.PENDING and task_actions(task).takes_decisions,
    }
