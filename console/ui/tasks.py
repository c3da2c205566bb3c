"""The task list: filters in the URL, cursor pages from the id the first page began at,
and live statuses for the rows on screen without moving them.

The list is a snapshot: page 1 records the newest id it showed (`snapshot`), the next
pages carry it, and new tasks never push rows down. The live fragment gets the rows on
screen with the status each shows (`row=<id>.<status>`); it answers with only the rows
whose status moved (out-of-band, by id) and the "N new" pill, or 204 (htmx leaves the
page alone) when nothing changed.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpResponse
from django.urls import reverse

from console.ui.web import NO_ROWS, kept, listing, page, param, screen, when
from runtime import states
from runtime.tasks.selectors import NEW_COUNTED_MAX, agent_list, task_changes, task_page

FILTERS = ("status", "agent", "parent", "root", "created_after", "created_before")
PAGE_SIZE = 50
NIL = "00000000-0000-0000-0000-000000000000"


def filters_of(request) -> dict:
    return {name: param(request, name) for name in FILTERS}


@screen
def task_list(request, principal):
    typed = kept(request, FILTERS)
    given_typed = {k: v for k, v in typed.items() if v}
    form = {
        "filters": typed,
        "given": given_typed,
        "statuses": states.TASK_STATUSES,
        "agents": [a.name for a in agent_list()],
        "page": NO_ROWS,
        "first_page": True,
        "next_url": None,
        "fresh_url": reverse("ui:tasks"),
        "newer": 0,
    }

    def read() -> dict:
        shown = filters_of(request)
        cursor = param(request, "cursor")
        rows = task_page(
            tenant=principal.tenant,
            status=shown["status"],
            agent=shown["agent"],
            parent=shown["parent"],
            root=shown["root"],
            created_after=when(shown["created_after"], "created_after"),
            created_before=when(shown["created_before"], "created_before"),
            after=cursor,
            limit=PAGE_SIZE,
        )
        given = {k: v for k, v in shown.items() if v}
        # The newest id page 1 showed (the nil id when it showed none: every later task is new).
        snapshot = param(request, "snapshot") or (None if cursor else str(rows.items[0].id) if rows.items else NIL)
        at_snapshot = {"snapshot": snapshot} if snapshot else {}
        return {
            "page": rows,
            "filters": shown,
            "given": given,
            "first_page": cursor is None,
            "next_url": "?" + urlencode({**given, "cursor": rows.next, **at_snapshot}) if rows.next else None,
            "live_url": reverse("ui:tasks-live") + "?" + urlencode({**given, **at_snapshot}),
            "fresh_url": reverse("ui:tasks") + ("?" + urlencode(given) if given else ""),
        }

    return listing(request, principal, "console/tasks.html", form, read, nav="tasks")


@screen
def task_list_live(request, principal):
    shown = filters_of(request)
    on_screen = dict(row.partition(".")[::2] for row in request.GET.getlist("row"))
    changes = task_changes(
        tenant=principal.tenant,
        ids=list(on_screen),
        newer_than=param(request, "snapshot"),
        status=shown["status"],
        agent=shown["agent"],
        parent=shown["parent"],
        root=shown["root"],
    )
    moved = [task for key, task in changes.tasks.items() if on_screen.get(key) != task.status]
    if not moved and str(changes.newer) == (param(request, "newer") or "0"):
        return HttpResponse(status=204)
    given = {k: v for k, v in shown.items() if v}
    return page(
        request,
        principal,
        "console/tasks.html#live",
        {
            "moved": moved,
            "newer": changes.newer,
            "capped": changes.newer >= NEW_COUNTED_MAX,
            "live_url": request.get_full_path().split("?")[0]
            + "?"
            + urlencode({**given, **({"snapshot": param(request, "snapshot")} if param(request, "snapshot") else {})}),
            "fresh_url": reverse("ui:tasks") + ("?" + urlencode(given) if given else ""),
        },
    )
