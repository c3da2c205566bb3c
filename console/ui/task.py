"""One task: its header, lineage, journal (paged), effects, attempts, audit events and
stop panel (console/ui/stops.py), kept live while it runs; and the operator's resume,
confirmed with what it will touch and a reason (stopping: console/ui/stops.py).

Live: the `#task-live` part polls its own fragment every 2 s while the tab is visible,
morphing in place (idiomorph keeps scroll, focus and text selection; console.js keeps
each <details> as the reader left it). A poll reads the version of what the view shows
first, in one statement (task_live_version), and answers 204 when it is the one the
browser shows: an unchanged poll reads nothing else. Once the task is finished, the
fragment comes back without its trigger, and polling stops.
"""

from __future__ import annotations

import re

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_POST

from console.access import OPERATE_ACTION, require
from console.ui.stops import task_stop_context
from console.ui.web import confirm, page, param, screen
from runtime import states
from runtime.approvals.selectors import approvals_of_task
from runtime.authz.selectors import decisions_page, effective_authority
from runtime.errors import InvalidInput, StewardError
from runtime.limits.selectors import breaker_tripped, tree_pause_holds, tree_pause_of
from runtime.tasks.actions import Refusal, task_actions
from runtime.tasks.selectors import (
    current_version,
    journal_page,
    live_attempt,
    step_count,
    step_get,
    steps_journaled,
    task_detail,
    task_get,
    task_live_version,
    task_page,
)
from runtime.tasks.services import task_resume
from runtime.versions.services import UPGRADABLE, task_upgrade

STEPS_PER_PAGE = 100
TREE_SHOWN = 200
DECISIONS_SHOWN = 50


def _subtree(principal, task) -> list[tuple[int, object]]:
    """The task's descendants as (depth, task), depth first in spawn order: read from the
    tree index of its root (the first TREE_SHOWN of the tree), each under its parent."""
    below = task_page(tenant=principal.tenant, root=task.root_id or task.id, limit=TREE_SHOWN).items
    children: dict = {}
    for node in below:
        children.setdefault(node.parent_id, []).append(node)
    flat, stack = [], [(1, child) for child in sorted(children.get(task.id, []), key=_spawn, reverse=True)]
    while stack:
        depth, node = stack.pop()
        flat.append((depth, node))
        stack.extend((depth + 1, child) for child in sorted(children.get(node.id, []), key=_spawn, reverse=True))
    return flat


def _spawn(task) -> int:
    return task.spawn_seq if task.spawn_seq is not None else -1


def _live(principal, task_id, version: str | None = None) -> dict:
    # The version first: read before what it stands for, it can only be older than the
    # view, and the next poll then builds the view again.
    version = version or task_live_version(task_id, tenant=principal.tenant)
    task = task_get(task_id, tenant=principal.tenant)
    detail = task_detail(task.id, step_limit=0, audit_limit=50, child_limit=200)
    attempt = detail.attempts[-1] if detail.attempts else None
    holder = live_attempt(task)  # the lease holder, as the API's task detail reads it
    tree = _subtree(principal, detail.task) if detail.children else []
    actions = task_actions(detail.task)
    finished = actions.finished
    approvals = approvals_of_task(task_id=task.id)
    # An effect's or an approval's step is a link only when the journal holds it.
    journaled = {
        seq
        for _, seq in steps_journaled(
            [(task.id, e.step_seq) for e in detail.effects] + [(task.id, a.seq) for a in approvals]
        )
    }
    for named in detail.effects:
        named.step_journaled = named.step_seq in journaled
    for named in approvals:
        named.step_journaled = named.seq in journaled
    return {
        "task": detail.task,
        "detail": detail,
        "attempt": attempt,
        "live_attempt": holder,
        "lease_expired": bool(holder and holder.lease_expires_at < timezone.now()),
        "tree": tree,
        "tree_cut": len(tree) >= TREE_SHOWN,
        "finished": finished,
        "version": version,
        "steps_total": step_count(task=task),
        "unknown_effects": [e for e in detail.effects if e.state == states.UNKNOWN],
        "decisions": decisions_page(tenant=principal.tenant, task=task.id, limit=DECISIONS_SHOWN).items,
        "tripped": breaker_tripped(detail.task),
        "pause": tree_pause_of(detail.task),
        "approvals": approvals,
        # A finished task takes no more steps: what its grants would allow it is moot.
        "authority": [] if finished else effective_authority(detail.task),
        # What the operator may do, and the facts the page shows (runtime/tasks/actions.py):
        # a stopping task is left to the stop it is under (its panel shows it); a new run
        # is made of a cancelled root task; a blocked task is resumed only if a denial, a
        # breaker or its tree's pause blocked it (an unknown effect is settled on its page).
        "actions": actions,
        "may_stop": actions.stop.allowed,
        "may_resume": actions.resume.allowed,
        "may_rerun": actions.rerun.allowed,
        # Between attempts, started, and not on the current version here: an operator may
        # try the upgrade (its dry replay decides; docs/adr/0037-agent-versions.md). One not
        # started yet takes the current version when it starts.
        "may_upgrade": detail.task.status in UPGRADABLE
        and detail.task.agent_version is not None
        and detail.task.agent_version != current_version(task.agent),
        # The new runs made of it, while it is one a new run can be made of.
        "reruns": list(detail.task.reruns.order_by("id").only("id", "status")[:20])
        if actions.rerun.refusal is not Refusal.STATUS
        else [],
    }


@screen
def task_page_view(request, principal, task_id):
    context = _live(principal, task_id)
    steps = journal_page(task=context["task"], limit=STEPS_PER_PAGE)
    return page(
        request,
        principal,
        "console/task.html",
        {**context, "steps": steps, **task_stop_context(principal, context["task"])},
        nav="tasks",
    )


@screen
def task_live(request, principal, task_id):
    version = task_live_version(task_id, tenant=principal.tenant)
    if version == param(request, "seen"):
        return HttpResponse(status=204)
    context = _live(principal, task_id, version)
    # 286: htmx stops polling (the task finished), after swapping in its final state.
    return page(request, principal, "console/task.html#live", context, status=286 if context["finished"] else 200)


@screen
def task_steps(request, principal, task_id):
    """One page of the journal after seq `cursor`; for htmx, just the rows and the next link."""
    task = task_get(task_id, tenant=principal.tenant)
    cursor = param(request, "cursor")
    if cursor is not None and not cursor.isdigit():
        raise InvalidInput("cursor must be a step seq", field="cursor")
    steps = journal_page(task=task, after=int(cursor) if cursor is not None else None, limit=STEPS_PER_PAGE)
    if request.htmx and not steps.items and not task_actions(task).finished:
        return HttpResponse(status=204)  # nothing newer yet: the "newer steps" poll keeps going
    template = "console/task.html#step-rows" if request.htmx else "console/steps.html"
    return page(request, principal, template, {"task": task, "steps": steps, "cursor": cursor}, nav="tasks")


@screen
def task_step(request, principal, task_id, seq):
    task = task_get(task_id, tenant=principal.tenant)
    step = step_get(task=task, seq=seq)
    # The steps beside it, linked only when the journal holds them (the last has no next).
    near = {s for _, s in steps_journaled([(task.id, seq - 1), (task.id, seq + 1)])}
    context = {"task": task, "step": step, "previous": seq - 1 in near, "next": seq + 1 in near}
    return page(request, principal, "console/step.html", context, nav="tasks")


def _confirm(request, principal, task_id, action: str):
    """GET: what the action will touch. POST: do it, with the reason (web.confirm)."""
    task = task_get(task_id, tenant=principal.tenant)
    require(principal, OPERATE_ACTION)

    tripped = breaker_tripped(task)

    def act(reason):
        # A tripped task's form offers its breaker's limit; left empty, the limit stays
        # (and the resumed attempt trips again at the same place, visibly).
        raised = (request.POST.get("limit") or "").strip()
        limits = (
            {tripped.limit_name: int(raised) if re.fullmatch(r"[0-9]{1,20}", raised) else raised}
            if tripped is not None and raised
            else None
        )
        resumed = task_resume(task_id=task.id, actor=principal.actor, note=reason, limits=limits)
        messages.success(
            request,
            "Queued for a new attempt."
            + (f" {tripped.limit_name} is now {raised}." if limits else "")
            + (
                f" Its tree's pause is lifted: {resumed.tree_queued} other "
                f"task{'s' if resumed.tree_queued != 1 else ''} queued again."
                if resumed.pause_id
                else ""
            ),
        )
        return redirect("ui:task", task.id)

    def shows():
        # Read afresh for each answer: what lifting the tree's pause would queue now.
        pause = tree_pause_of(task)
        held = [t for t in tree_pause_holds(task) if t.id != task.id] if pause else []
        return {"affected": [task], "pause": pause, "held": held}

    return confirm(
        request,
        principal,
        "console/task_confirm.html",
        {
            "task": task,
            "action": action,
            "tripped": tripped,
            "limit": (request.POST.get("limit") or "") if request.method == "POST" else "",
        },
        act=act,
        shows=shows,
        nav="tasks",
    )


@screen
def resume(request, principal, task_id):
    return _confirm(request, principal, task_id, "resume")


@require_POST
@screen
def upgrade(request, principal, task_id):
    """Move the task to the current version of its agent here, if its journal replays
    there (runtime/versions/services.py); a refusal is shown with its code."""
    task = task_get(task_id, tenant=principal.tenant)
    require(principal, OPERATE_ACTION)
    try:
        done = task_upgrade(task_id=task.id, tenant=principal.tenant, actor=principal.actor)
    except StewardError as exc:
        messages.error(request, f"{exc.code}: {exc.message}")
    else:
        messages.success(request, f"Upgraded from version {done.from_version} to {done.to_version}.")
    return redirect("ui:task", task.id)


__all__ = ["task_page_view", "task_live", "task_steps", "task_step", "resume", "upgrade"]
