"""`manage.py steward stop|cancel|stop-summary|rerun|agent-stop|agent-reopen`: stops from a
terminal, through the same services and selectors as the console and the API.

The CLI is the operators' own shell (whoever runs manage.py holds the database), so it
is not scoped to a tenant: a task names its own, and the kill switch takes --tenant."""

from __future__ import annotations

from runtime.management.format import block, json_text, short, table, when
from runtime.stops.selectors import stop_summary
from runtime.stops.services import agent_reopen, agent_stop, task_rerun, task_stop
from runtime.tasks.selectors import task_get, task_id_from_prefix

TASK_HELP = "a task id, or enough of its start to name one task"
DETAIL_WIDTH = 60  # a boundary's report, cut to fit a line (--json prints it whole)


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "stop",
        aliases=["cancel"],
        help="stop a task and its live descendants (with a reason)",
        description="Every live task of the tree moves to stopping, which closes its admission; "
        "each is cancelled once its four boundaries acknowledged (or its bound "
        "passed). `cancel` is the same command under its former name. Follow it "
        "with `steward stop-summary TASK`.",
    )
    p.add_argument("task", help=TASK_HELP)
    p.add_argument("--reason", required=True, help="why (kept in the stop and its audit events)")

    p = sub.add_parser(
        "stop-summary",
        help="a task's latest stop, boundary by boundary",
        description="Each boundary of each task: acknowledged, waiting, missing (cancelled at "
        "its bound without it) or late; the effects committed before the stop, those "
        "in flight with no known outcome, and what is left unresolved.",
    )
    p.add_argument("task", help=TASK_HELP)
    p.add_argument("--json", dest="as_json", action="store_true", help="print the summary as one JSON object")

    p = sub.add_parser("rerun", help="a new run of a cancelled task (a new id, linked to the old one)")
    p.add_argument("task", help=TASK_HELP)
    p.add_argument("--reason", required=True)

    p = sub.add_parser(
        "agent-stop",
        help="the kill switch: close an agent's submission and stop its tasks",
        description="In one tenant: no task of the agent is admitted until agent-reopen, and "
        "every live task of it, with its descendants, is stopped under one stop.",
    )
    p.add_argument("agent")
    p.add_argument("--tenant", required=True)
    p.add_argument("--reason", required=True)

    p = sub.add_parser("agent-reopen", help="open an agent's submission again")
    p.add_argument("agent")
    p.add_argument("--tenant", required=True)
    p.add_argument("--reason", default="", help="why (kept in the audit event)")


def do_stop(out, *, actor, task, reason, **_) -> None:
    task_id = task_id_from_prefix(task)
    started = task_stop(task_id=task_id, actor=actor, reason=reason)
    _started(out, started)
    if started.stopping:
        out.write(f"follow it: steward stop-summary {task_id}\n")


def do_stop_summary(out, *, task, as_json, **_) -> None:
    found = task_get(task_id_from_prefix(task))
    summary = stop_summary(task_id=found.id, tenant=found.tenant)
    if as_json:
        out.write(json_text(summary_json(summary)) + "\n")
        return
    stop = summary.stop
    last = summary.to_last_ack
    out.write(
        block(
            [
                ("stop", stop.id),
                (
                    "of",
                    f"task {stop.task_id}" if stop.task_id else f"agent {stop.agent} in {stop.tenant} (kill switch)",
                ),
                ("by", f"{stop.actor} at {when(stop.requested_at)}"),
                ("reason", short(stop.reason, 100)),
                ("bound", f"{stop.bound_seconds:g} s per level of the tree"),
                ("state", summary.outcome_words + (f" at {when(stop.finished_at)}" if stop.finished_at else "")),
                ("tasks", f"{summary.task_count} ({summary.stopping} still stopping)"),
                (
                    "acks",
                    f"{summary.acks} of {4 * summary.task_count}"
                    + (f", the last {last.total_seconds():.3f} s after the request" if last is not None else ""),
                ),
            ]
        )
        + "\n\n"
    )
    rows = []
    for one in summary.tasks:
        for row in one.rows:
            state = row.state + (" (past its bound)" if row.state == "waiting" and one.bound_passed else "")
            rows.append(
                [
                    one.task.id,
                    one.task.status,
                    row.boundary,
                    state,
                    when(row.at),
                    row.by or "-",
                    short(row.detail, DETAIL_WIDTH) if row.detail else "-",
                ]
            )
    out.write(table(["task", "status", "boundary", "state", "at", "by", "reported"], rows) + "\n")
    if summary.tasks_more:
        out.write(f"and {summary.tasks_more} more task(s): --json lists the same first {len(summary.tasks)}\n")
    for title, capped in (
        ("effects committed before the stop", summary.committed_before),
        ("effects in flight (no known outcome)", summary.in_flight),
        ("effects settled since the stop", summary.settled_since),
    ):
        if capped.items:
            out.write(
                f"\n{title}\n"
                + table(
                    ["effect", "task", "name", "class", "state", "settled"],
                    [[e.id, e.task_id, e.name, e.effect_class, e.state, when(e.settled_at)] for e in capped],
                )
                + "\n"
            )
            if capped.more:
                out.write(f"and {capped.more} more\n")
    if summary.calls.items:
        out.write(
            "\ngateway calls unanswered or cut\n"
            + table(
                ["call", "task", "route", "outcome", "started"],
                [[c.id, c.task_id, c.route, c.outcome, when(c.started_at)] for c in summary.calls],
            )
            + "\n"
        )
        if summary.calls.more:
            out.write(f"and {summary.calls.more} more\n")
    out.write("\nunresolved: " + ("; ".join(summary.unresolved) if summary.unresolved else "nothing") + "\n")


def summary_json(summary) -> dict:
    stop = summary.stop
    last = summary.to_last_ack
    return {
        "stop": {
            "id": stop.id,
            "tenant": stop.tenant,
            "task": stop.task_id,
            "agent": stop.agent,
            "actor": stop.actor,
            "reason": stop.reason,
            "requested_at": stop.requested_at,
            "bound_seconds": stop.bound_seconds,
            "finished_at": stop.finished_at,
            "outcome": stop.outcome,
            "state": summary.outcome_words,
        },
        "task_count": summary.task_count,
        "stopping": summary.stopping,
        "acks": summary.acks,
        "complete": summary.complete,
        "counts": summary.counts,
        "last_ack_at": summary.last_ack_at,
        "to_last_ack_ms": round(last.total_seconds() * 1000, 3) if last is not None else None,
        "tasks": [
            {
                "id": t.task.id,
                "agent": t.task.agent,
                "status": t.task.status,
                "parent": t.task.parent_id,
                "deadline": t.deadline,
                "bound_passed": t.bound_passed,
                "cancelled_at": t.cancelled_at,
                "boundaries": [
                    {"boundary": r.boundary, "state": r.state, "at": r.at, "by": r.by, "detail": r.detail}
                    for r in t.rows
                ],
            }
            for t in summary.tasks
        ],
        "tasks_more": summary.tasks_more,
        **{
            name: {
                "items": [
                    {
                        "id": e.id,
                        "task": e.task_id,
                        "name": e.name,
                        "effect_class": e.effect_class,
                        "state": e.state,
                        "settled_at": e.settled_at,
                    }
                    for e in capped
                ],
                "more": capped.more,
            }
            for name, capped in (
                ("committed_before", summary.committed_before),
                ("in_flight", summary.in_flight),
                ("settled_since", summary.settled_since),
            )
        },
        "calls": {
            "items": [
                {"id": c.id, "task": c.task_id, "route": c.route, "outcome": c.outcome, "started_at": c.started_at}
                for c in summary.calls
            ],
            "more": summary.calls.more,
        },
        "unresolved": summary.unresolved,
    }


def do_rerun(out, *, actor, task, reason, **_) -> None:
    old = task_id_from_prefix(task)
    made = task_rerun(task_id=old, actor=actor, reason=reason)
    out.write(f"{made}  a new run of {old}  [queued]\n")


def do_agent_stop(out, *, actor, agent, tenant, reason, **_) -> None:
    started = agent_stop(tenant=tenant, agent=agent, actor=actor, reason=reason)
    out.write(f"agent {agent} is stopped in {tenant}: submission closed until agent-reopen\n")
    _started(out, started)


def do_agent_reopen(out, *, actor, agent, tenant, reason, **_) -> None:
    changed = agent_reopen(tenant=tenant, agent=agent, actor=actor, reason=reason)
    out.write(f"agent {agent} is open in {tenant}" + ("" if changed else " (it was open already)") + "\n")


def _started(out, started) -> None:
    out.write(
        f"stop {started.stop_id}: {len(started.tasks)} task(s), {len(started.cancelled)} cancelled, "
        f"{len(started.stopping)} stopping\n"
    )
    cancelled = set(started.cancelled)
    for task_id in started.tasks:
        out.write(f"  {task_id}  {'cancelled' if task_id in cancelled else 'stopping'}\n")
