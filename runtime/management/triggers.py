"""`manage.py steward schedules|webhooks|dependencies ...`: triggers from a terminal,
through the same services as the console and the API (runtime/triggers/).

    schedules list --tenant T [--paused]       schedules show ID
    schedules create --tenant T --name N --agent A --cron "0 9 * * *" [--timezone Z]
              [--input JSON] [--missed skip|catch_up] [--overlap skip|queue|stop] [--pool P]
    schedules pause ID | resume ID
    webhooks list --tenant T | show ID (with recent deliveries) | create --tenant T --name N
              --agent A (prints the secret, once) | pause ID | resume ID
    dependencies list --tenant T [--state S] | create --tenant T --agent A --after TASK ...
              [--on-failure skip|run|fail]
"""

from __future__ import annotations

from runtime import encoding
from runtime.errors import InvalidArgument
from runtime.management.format import block, table, when
from runtime.models.trigger import DEPENDENCY_POLICIES, DEPENDENCY_STATES, MISSED_POLICIES, OVERLAP_POLICIES
from runtime.triggers import selectors, services


def add_parsers(sub) -> None:
    p = sub.add_parser("schedules", help="cron schedules: list, show, create, pause, resume")
    p.add_argument("op", choices=("list", "show", "create", "pause", "resume"))
    p.add_argument("id", nargs="?", help="the schedule's id (show, pause, resume)")
    p.add_argument("--tenant")
    p.add_argument("--name", dest="trigger_name")
    p.add_argument("--agent")
    p.add_argument("--input", dest="trigger_input", default="{}", help="the task input, JSON")
    p.add_argument("--cron")
    p.add_argument("--timezone", default="UTC")
    p.add_argument("--missed", choices=MISSED_POLICIES, default="skip")
    p.add_argument("--overlap", choices=OVERLAP_POLICIES, default="skip")
    p.add_argument("--pool")
    p.add_argument("--owner")
    p.add_argument("--paused", action="store_true", help="list: only paused ones; create: start paused")

    p = sub.add_parser("webhooks", help="signed webhooks: list, show (recent deliveries), create, pause, resume")
    p.add_argument("op", choices=("list", "show", "create", "pause", "resume"))
    p.add_argument("id", nargs="?")
    p.add_argument("--tenant")
    p.add_argument("--name", dest="trigger_name")
    p.add_argument("--agent")
    p.add_argument("--pool")
    p.add_argument("--owner")

    p = sub.add_parser("dependencies", help="dependency triggers: list, create")
    p.add_argument("op", choices=("list", "create"))
    p.add_argument("--tenant")
    p.add_argument("--agent")
    p.add_argument("--input", dest="trigger_input", default="{}")
    p.add_argument("--after", action="append", default=[], help="a prerequisite task id (repeat)")
    p.add_argument("--on-failure", dest="on_failure", choices=DEPENDENCY_POLICIES, default="skip")
    p.add_argument("--state", dest="trigger_state", choices=DEPENDENCY_STATES)
    p.add_argument("--pool")
    p.add_argument("--owner")


def _need(**values) -> None:
    missing = [f"--{k.replace('trigger_', '')}" for k, v in values.items() if not v]
    if missing:
        raise InvalidArgument(f"this needs {', '.join(missing)}", missing=missing)


def _input(raw: str):
    from runtime import config

    return encoding.parse(raw, what="input", limit=config.max_input_bytes(), setting="STEWARD_MAX_INPUT_BYTES")


def schedules(
    out,
    *,
    actor,
    op,
    id,
    tenant,
    trigger_name,
    agent,
    trigger_input,
    cron,
    timezone,
    missed,
    overlap,
    pool,
    owner,
    paused,
    **_,
) -> None:
    if op == "list":
        _need(tenant=tenant)
        rows = [
            [
                s.id,
                s.name,
                s.agent,
                s.cron,
                s.timezone,
                "paused" if s.paused else when(s.next_fire_at),
                s.missed_policy,
                s.overlap_policy,
            ]
            for s in selectors.schedule_list(tenant=tenant, paused=True if paused else None)
        ]
        out.write(table(["id", "name", "agent", "cron", "timezone", "next", "missed", "overlap"], rows))
    elif op == "create":
        _need(tenant=tenant, trigger_name=trigger_name, agent=agent, cron=cron)
        s = services.schedule_create(
            tenant=tenant,
            name=trigger_name,
            agent=agent,
            input=_input(trigger_input),
            owner=owner or actor,
            cron=cron,
            timezone=timezone,
            missed_policy=missed,
            overlap_policy=overlap,
            pool=pool,
            paused=paused,
            actor=actor,
        )
        out.write(f"created schedule {s.id} ({s.name}); next run {when(s.next_fire_at)}")
    else:
        _need(id=id)
        if op == "show":
            s = selectors.schedule_get(id)
            out.write(
                block(
                    [
                        ("schedule", s.id),
                        ("name", s.name),
                        ("tenant", s.tenant),
                        ("agent", s.agent),
                        ("cron", f"{s.cron} ({s.timezone})"),
                        ("missed", s.missed_policy),
                        ("overlap", s.overlap_policy),
                        ("paused", s.paused),
                        ("last task", s.last_task_id or "-"),
                        ("next runs", ", ".join(when(t) for t in selectors.schedule_upcoming(s)) or "-"),
                    ]
                )
            )
        else:
            changed = (services.schedule_pause if op == "pause" else services.schedule_resume)(
                schedule_id=id, actor=actor
            )
            out.write(f"{op}d schedule {id}" if changed else f"schedule {id} was already {op}d")


def webhooks(out, *, actor, op, id, tenant, trigger_name, agent, pool, owner, **_) -> None:
    if op == "list":
        _need(tenant=tenant)
        rows = [
            [w.id, w.name, w.agent, "paused" if w.paused else "active", f"/hooks/{w.id}"]
            for w in selectors.webhook_list(tenant=tenant)
        ]
        out.write(table(["id", "name", "agent", "state", "url"], rows))
    elif op == "create":
        _need(tenant=tenant, trigger_name=trigger_name, agent=agent)
        w, secret = services.webhook_create(
            tenant=tenant, name=trigger_name, agent=agent, owner=owner or actor, pool=pool, actor=actor
        )
        out.write(f"created webhook {w.id} ({w.name}) at /hooks/{w.id}\nsecret (shown once): {secret}")
    else:
        _need(id=id)
        if op == "show":
            w = selectors.webhook_get(id)
            out.write(
                block(
                    [
                        ("webhook", w.id),
                        ("name", w.name),
                        ("tenant", w.tenant),
                        ("agent", w.agent),
                        ("paused", w.paused),
                        ("url", f"/hooks/{w.id}"),
                    ]
                )
            )
            rows = [[d.delivery_id, when(d.received_at), d.task_id] for d in selectors.webhook_deliveries(w)]
            out.write(table(["delivery", "received", "task"], rows))
        else:
            changed = (services.webhook_pause if op == "pause" else services.webhook_resume)(webhook_id=id, actor=actor)
            out.write(f"{op}d webhook {id}" if changed else f"webhook {id} was already {op}d")


def dependencies(
    out, *, actor, op, tenant, agent, trigger_input, after, on_failure, trigger_state, pool, owner, **_
) -> None:
    _need(tenant=tenant)
    if op == "list":
        rows = [
            [d.id, d.agent, len(d.prerequisites), d.on_failure, d.state, d.task_id or "-", d.reason]
            for d in selectors.dependency_list(tenant=tenant, state=trigger_state)
        ]
        out.write(table(["id", "agent", "after", "on_failure", "state", "task", "reason"], rows))
    else:
        _need(agent=agent, after=after)
        d = services.dependency_create(
            tenant=tenant,
            agent=agent,
            input=_input(trigger_input),
            owner=owner or actor,
            prerequisites=after,
            on_failure=on_failure,
            pool=pool,
            actor=actor,
        )
        out.write(f"created dependency trigger {d.id}: {agent} after {len(d.prerequisites)} task(s)")
