"""`manage.py steward <command>`: operate Steward from a terminal.

    submit AGENT --input JSON     tasks      show TASK [--full|--json]   effects   (lists page: --after)
    resolve-effect ID --as ...    resume     audit verify
    stop TASK --reason R (or cancel)          stop-summary TASK [--json]   rerun TASK --reason R
    agent-stop AGENT --tenant T --reason R    agent-reopen AGENT --tenant T
    supervise                     pools      pool NAME      pool-create NAME   pool-remove NAME
    agents                        grants list|show|preview|create|narrow|revoke
    versions [AGENT] --tenant T   upgrade TASK [--to V]   upgrade-all AGENT --from V [--to V] --tenant T
    retire-version AGENT V        patch AGENT NAME --tenant T
    approvals list|show|approve|deny
    schedules list|show|create|pause|resume     webhooks list|show|create|pause|resume
    dependencies list|create
    budgets --tenant T   budget-set --tenant T --task-tokens N   quotas   quota-set SERVICE   quota-remove SERVICE
    workers credentials list|create NAME|revoke ID
    memory list|show|upgrade|rollback         (agent memory: runtime/management/memory.py)
    partitions list|ensure|drop --table T --before DATE   audit archive --before DATE --out DIR   audit verify --archive PATH

A TASK may be given whole or as a unique prefix of its id (`steward show 01a230af-d9`);
a prefix that begins several ids is refused with AMBIGUOUS_TASK_ID, naming them.

Every refusal prints `CODE: message` on stderr and exits 2, whether the parser or a
service refused (docs/limits.md lists the codes); nothing is written before a refusal.
"""

from __future__ import annotations

import dataclasses
import functools
import getpass
import json
import os
import re
import sys
import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime import agents, arguments, config, encoding, states
from runtime.effects.selectors import effect_page
from runtime.effects.services import RESOLUTIONS, effect_resolve
from runtime.errors import InvalidArgument, InvalidEncoding, InvalidInput, StewardError
from runtime.limits.selectors import pool_usage, tree_pause_of
from runtime.limits.services import pool_create, pool_remove, pool_set_limits
from runtime.management import (
    approvals,
    budgets,
    grants,
    lifecycle,
    memory,
    partitions,
    stops,
    triggers,
    versions,
    workers,
)
from runtime.management.format import block, json_text, record, short, table, when
from runtime.tasks.actions import Action, TaskActions, task_actions
from runtime.tasks.selectors import ANY_VERSION, task_detail, task_get, task_id_from_prefix, task_page
from runtime.tasks.services import task_resume, task_submit
from runtime.trail.selectors import audit_seals
from runtime.trail.services import audit_check, audit_seal_now, audit_verify

# Bounds of the CLI's own numbers (docs/limits.md). A list shows one page; the API's
# pages will share arguments.PAGE_MAX.
WAIT_MAX_SECONDS = 86_400.0
INTERVAL_MIN_SECONDS, INTERVAL_MAX_SECONDS = 0.05, 3_600.0
TASK_HELP = "a task id, or enough of its start to name one task"
DETAIL_ROWS = 200  # `show`: how many steps, children and audit rows (task_detail's limits)
# `show`: the command that makes the event releasing a blocked task (task_actions'
# released_by, from states.BLOCKED_BY): its wording here, the rule in runtime/tasks/actions.py.
RELEASES = {
    states.TaskEvent.UNBLOCK: "resolve the effect: resolve-effect",
    states.TaskEvent.RESUME: "change the grants, then resume",
    states.TaskEvent.DECIDED: "a person decides its approval: approvals",
    states.TaskEvent.RESET: "raise the limit: resume --limit NAME=N",
    states.TaskEvent.RELEASE: "resume any task of its tree to lift the pause",
}


def _actions_line(acts: TaskActions) -> str:
    """`stop; resume refused (effect_unknown); rerun refused (status)`: what `show`
    says an operator may do to the task, and the refusal's code for the rest."""
    return "; ".join(
        str(action) if verdict.allowed else f"{action} refused ({verdict.refusal})"
        for action, verdict in ((a, acts.of(a)) for a in sorted(Action, key=lambda a: not acts.of(a).allowed))
    )


class Command(BaseCommand):
    help = "Operate Steward: submit and inspect tasks, resolve effects, resume, verify the audit trail."

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.error = functools.partial(_Parser.error, parser)  # the subcommands' parsers are _Parsers
        return parser

    def add_arguments(self, parser):
        parser.add_argument("--actor", default=f"cli:{getpass.getuser()}", help="who is acting (audited)")
        sub = parser.add_subparsers(dest="command", required=True, metavar="command", parser_class=_Parser)

        p = sub.add_parser("submit", help="submit a task")
        p.add_argument("agent")
        p.add_argument("--input", default="{}", help="JSON object (or @file.json)")
        p.add_argument("--key", help="caller idempotency key")
        p.add_argument("--tenant", default="default")
        p.add_argument("--owner", help="actor the task runs as (default: --actor)")
        p.add_argument("--pool")
        p.add_argument("--wait", type=float, default=0, help="seconds to wait for a terminal status")

        p = sub.add_parser("tasks", help="list tasks, newest first")
        p.add_argument("--status", choices=states.TASK_STATUSES)
        p.add_argument("--agent")
        p.add_argument("--tenant")
        p.add_argument("--pool")
        p.add_argument("--parent", metavar="TASK", help="the children of this task (an id or a unique prefix)")
        p.add_argument("--root", metavar="TASK", help="the tasks below this root task (an id or a unique prefix)")
        p.add_argument("--limit", type=int, default=30)
        p.add_argument("--after", metavar="CURSOR", help="the page after the one that printed CURSOR")

        p = sub.add_parser(
            "show",
            help="a task's attempts, journal, effects, children and audit",
            description="A task's record, attempts, journal, effects, children and audit "
            f"(at most {DETAIL_ROWS} each of its latest steps, its first children "
            "and its latest audit rows). Long "
            "values are cut to fit a line: --full prints them whole, --json "
            "prints everything as one JSON object.",
        )
        p.add_argument("task", help=TASK_HELP)
        whole = p.add_mutually_exclusive_group()
        whole.add_argument("--full", action="store_true", help="print every value whole, not cut to fit a line")
        whole.add_argument(
            "--json", dest="as_json", action="store_true", help="print the detail as one JSON object (values whole)"
        )

        p = sub.add_parser("effects", help="list the effect ledger")
        p.add_argument("--task", metavar="TASK", help="this task's effects (an id or a unique prefix)")
        p.add_argument("--state", choices=states.EFFECT_STATES)
        p.add_argument("--class", dest="effect_class", choices=states.EFFECT_CLASSES)
        p.add_argument("--limit", type=int, default=30)
        p.add_argument("--after", metavar="CURSOR", help="the page after the one that printed CURSOR")

        p = sub.add_parser("resolve-effect", help="settle an `unknown` effect and unblock its task")
        p.add_argument("effect", type=int)
        p.add_argument("--as", dest="outcome", required=True, choices=sorted(RESOLUTIONS))
        p.add_argument("--receipt", help="JSON receipt (with --as committed)")
        p.add_argument("--note", default="")

        p = sub.add_parser("resume", help="queue a dead, failed, cancelled, denied or tripped task again")
        p.add_argument("task", help=TASK_HELP)
        p.add_argument("--note", default="")
        p.add_argument(
            "--limit",
            dest="breaker_limits",
            action="append",
            default=[],
            metavar="NAME=N",
            help="a breaker limit for this task alone (repeatable): max_children, max_depth, "
            "max_spawns_per_minute, max_steps, max_wall_clock_seconds",
        )

        stops.add_parsers(sub)
        versions.add_parsers(sub)
        partitions.add_parsers(sub)

        p = sub.add_parser(
            "audit",
            help="audit trail: verify it, seal it, export its seals, archive its old partitions",
            description="verify: walk every chain and check the seals over them (exit 3 names "
            "what is wrong); with --archive PATH, check an archive file or folder instead, "
            "without the database. seal: seal every tenant's moved chain heads now (the "
            "supervisor does so every STEWARD_AUDIT_SEAL_SECONDS). seals: print "
            "every seal as JSON lines, to keep a copy outside the database. archive: write "
            "each audit partition that ends before --before to --out as JSON lines with its "
            "seals, then drop it (audited).",
        )
        p.add_argument("action", choices=["verify", "seal", "seals", "archive"])
        p.add_argument("--archive", metavar="PATH", help="verify: an archive file, or a folder of them")
        p.add_argument("--before", metavar="DATE", help="archive: partitions that end by this date (UTC)")
        p.add_argument("--out", dest="out_dir", metavar="DIR", help="archive: the folder to write to")
        p.add_argument("--tenant", help="only this tenant's chains and seals")
        p.add_argument(
            "--after",
            type=int,
            metavar="AUDIT_ID",
            help="verify only the rows after this audit id (each linked to the row before it; "
            "the seals are not checked)",
        )

        p = sub.add_parser("supervise", help="run the supervisor sweep")
        p.add_argument("--once", action="store_true")
        p.add_argument("--interval", type=float, help="seconds between sweeps (default SWEEP_SECONDS)")

        p = sub.add_parser("pools", help="pools, limits and usage")
        p.add_argument("--after", metavar="CURSOR", help="the page after the one that printed CURSOR")
        p = sub.add_parser("pool", help="change a pool's limits")
        p.add_argument("name")
        p.add_argument("--max-running", type=int)
        p.add_argument("--max-queued", type=int)

        p = sub.add_parser("pool-create", help="create a pool (audited)")
        p.add_argument("name")
        p.add_argument("--max-running", type=int, required=True)
        p.add_argument("--max-queued", type=int, required=True)
        p.add_argument("--note", default="")

        p = sub.add_parser("pool-remove", help="remove a pool no task names (audited)")
        p.add_argument("name")
        p.add_argument("--note", default="")

        sub.add_parser("agents", help="registered agents")
        grants.add_parser(sub)
        approvals.add_parser(sub)
        triggers.add_parsers(sub)
        budgets.add_parsers(sub)
        workers.add_parser(sub)
        lifecycle.add_parsers(sub)
        memory.add_parser(sub)

    def handle(self, *args, command, actor, **options):
        handler = getattr(self, "do_" + command.replace("-", "_"))
        try:
            _check_arguments(actor=actor, **options)
            handler(actor=actor, **options)
            self.stdout.flush()
        except StewardError as exc:
            raise CommandError(f"{exc.code}: {exc.message}", returncode=2) from None
        except BrokenPipeError:
            _reader_went_away()

    # --- commands ----------------------------------------------------------------------

    def do_submit(self, *, actor, agent, input, key, tenant, owner, pool, wait, **_):
        payload = _json_arg(input, "--input", limit=config.max_input_bytes(), setting="STEWARD_MAX_INPUT_BYTES")
        sub = task_submit(
            agent=agent, input=payload, tenant=tenant, owner=owner or actor, actor=actor, idempotency_key=key, pool=pool
        )
        verb = "submitted" if sub.created else f"already exists for key {key!r}"
        self.stdout.write(f"{sub.task_id}  {verb}  [{sub.status}]")
        deadline = time.monotonic() + wait
        while wait and time.monotonic() < deadline:
            task = task_get(sub.task_id)
            if task_actions(task).finished:
                self.stdout.write(
                    f"{task.status}: {short(task.output if task.output is not None else task.error, 200)}"
                )
                return
            time.sleep(0.2)
        if wait:
            self.stdout.write(f"still {task_get(sub.task_id).status} after {wait:g}s")

    def do_tasks(self, *, status, agent, tenant, pool, parent, root, limit, after, **_):
        page = task_page(
            status=status,
            agent=agent,
            tenant=tenant,
            pool=pool,
            parent=_task(parent),
            root=_task(root),
            limit=limit,
            after=after,
        )
        rows = [
            [t.id, t.agent, t.status, t.epoch, t.pool_id, when(t.updated_at), short(t.status_note, 40)] for t in page
        ]
        self.stdout.write(table(["task", "agent", "status", "epoch", "pool", "updated", "note"], rows))
        self._next(page)

    def do_show(self, *, task, full, as_json, **_):
        d = task_detail(_task(task), step_limit=DETAIL_ROWS, audit_limit=DETAIL_ROWS, child_limit=DETAIL_ROWS)
        if as_json:
            self.stdout.write(
                json_text(
                    {
                        "task": record(d.task),
                        "attempts": [record(a) for a in d.attempts],
                        "journal": [record(s) for s in d.steps],
                        "effects": [record(e) for e in d.effects],
                        "children": [
                            record(c, ["id", "agent", "status", "created_at", "finished_at"]) for c in d.children
                        ],
                        "audit": [record(a) for a in d.audit],
                        "tree_pause": dataclasses.asdict(pause)
                        if (pause := tree_pause_of(d.task)) is not None
                        else None,
                        "actions": task_actions(d.task).as_dict(),
                    }
                )
            )
            return
        was_cut = False

        def cut(value, width: int) -> str:
            nonlocal was_cut
            text = short(value, None if full else width)
            was_cut = was_cut or text != short(value, None)
            return text

        t = d.task
        acts = task_actions(t)
        pause = tree_pause_of(t)
        self.stdout.write(
            block(
                [
                    ("task", t.id),
                    (
                        "agent",
                        t.agent
                        + (
                            f" (version {t.agent_version})"
                            if t.agent_version
                            else " (version fixed when it starts)"
                            if t.agent_version is None
                            else ""
                        ),
                    ),
                    ("status", t.status + (f" ({t.status_note})" if t.status_note else "")),
                    *(
                        [
                            (
                                "waiting",
                                (
                                    f"for {ANY_VERSION}"
                                    if d.waiting_for_version == ANY_VERSION
                                    else f"for version {d.waiting_for_version}"
                                )
                                + ": no live worker serves it",
                            )
                        ]
                        if d.waiting_for_version
                        else []
                    ),
                    *(
                        [
                            (
                                "blocked",
                                t.blocked_reason
                                + (f", decision {t.blocked_decision_id}" if t.blocked_decision_id else "")
                                + (
                                    f", breaker {t.breaker} ({t.error.get('message', '')})"
                                    if acts.tripped and t.error
                                    else ""
                                )
                                + f" ({RELEASES[acts.released_by]})",
                            )
                        ]
                        if acts.released_by is not None
                        else []
                    ),
                    ("actions", _actions_line(acts)),
                    *(
                        [
                            (
                                "tree paused",
                                f"pause {pause.id}: breaker {pause.breaker} tripped at {pause.task_id} "
                                f"({pause.observed} against {pause.limit}), {when(pause.paused_at)}; holds "
                                f"{pause.holding}, {pause.running} still running; resume any task of the tree "
                                f"to lift it",
                            )
                        ]
                        if pause is not None
                        else []
                    ),
                    ("tenant/owner", f"{t.tenant} / {t.owner}"),
                    ("pool", t.pool_id),
                    ("epoch", t.epoch),
                    ("parent", t.parent_id or "-"),
                    ("root", t.root_id),
                    ("key", t.idempotency_key or "-"),
                    ("created", when(t.created_at)),
                    ("finished", when(t.finished_at)),
                    ("input", cut(t.input, 100)),
                    ("output", cut(t.output, 100)),
                    ("error", cut(t.error, 100)),
                ]
            )
        )
        self._section(
            "attempts",
            ["epoch", "reason", "worker", "started", "ended", "end"],
            [
                [a.epoch, a.reason, a.worker, when(a.started_at), when(a.ended_at), a.end_reason or "live"]
                for a in d.attempts
            ],
        )
        self._section(
            "journal",
            ["seq", "kind", "name", "epoch", "result"],
            [[s.seq, s.kind, s.name, s.epoch, cut(s.error or s.output, 60)] for s in d.steps],
        )
        self._section(
            "effects",
            ["id", "name", "class", "keyed", "state", "sends", "key"],
            [[e.id, e.name, e.effect_class, e.keyed, e.state, e.sends, e.key] for e in d.effects],
        )
        self._section("children", ["task", "agent", "status"], [[c.id, c.agent, c.status] for c in d.children])
        self._section(
            "audit",
            ["id", "at", "kind", "actor", "data"],
            [[a.id, when(a.at), a.kind, a.actor, cut(a.data, 60)] for a in d.audit],
        )
        if was_cut:
            self.stdout.write("\n(long values are cut to fit: --full prints them whole, --json as JSON)")

    def do_effects(self, *, task, state, effect_class, limit, after, **_):
        page = effect_page(task=_task(task), state=state, effect_class=effect_class, limit=limit, after=after)
        rows = [[e.id, e.task_id, e.name, e.effect_class, e.state, e.sends, when(e.created_at)] for e in page]
        self.stdout.write(table(["id", "task", "name", "class", "state", "sends", "created"], rows))
        self._next(page)

    def do_resolve_effect(self, *, actor, effect, outcome, receipt, note, **_):
        parsed = None
        if receipt:
            parsed = _json_arg(
                receipt, "--receipt", limit=config.max_output_bytes(), setting="STEWARD_MAX_OUTPUT_BYTES"
            )
        row = effect_resolve(effect_id=effect, outcome=outcome, actor=actor, receipt=parsed, note=note)
        self.stdout.write(f"effect #{row.id} is now {row.state}; task {row.task_id} re-queued if it was blocked")

    def do_resume(self, *, actor, task, note, breaker_limits, **_):
        task = _task(task)
        limits = _limits(breaker_limits) if breaker_limits else None
        resumed = task_resume(task_id=task, actor=actor, note=note, limits=limits)
        raised = f", limits {', '.join(f'{k}={v}' for k, v in limits.items())}" if limits else ""
        self.stdout.write(f"{task} queued for a new attempt (reason: resume{raised})")
        if resumed.pause_id is not None:
            self.stdout.write(
                f"lifted its tree's pause {resumed.pause_id}: {resumed.tree_queued} other "
                f"task{'s' if resumed.tree_queued != 1 else ''} queued again"
            )

    def do_versions(self, **options):
        versions.do_versions(self.stdout, **options)

    def do_upgrade(self, **options):
        versions.do_upgrade(self.stdout, **options)

    def do_upgrade_all(self, **options):
        versions.do_upgrade_all(self.stdout, **options)

    def do_retire_version(self, **options):
        versions.do_retire_version(self.stdout, **options)

    def do_patch(self, **options):
        versions.do_patch(self.stdout, **options)

    def do_stop(self, **options):
        stops.do_stop(self.stdout, **options)

    do_cancel = do_stop  # its former name (an alias of the parser)

    def do_stop_summary(self, **options):
        stops.do_stop_summary(self.stdout, **options)

    def do_rerun(self, **options):
        stops.do_rerun(self.stdout, **options)

    def do_agent_stop(self, **options):
        stops.do_agent_stop(self.stdout, **options)

    def do_agent_reopen(self, **options):
        stops.do_agent_reopen(self.stdout, **options)

    def do_partitions(self, **options):
        partitions.do_partitions(self.stdout, **options)

    def do_audit(self, *, action, after, tenant, archive=None, before=None, out_dir=None, actor=None, **_):
        """The verdict on stdout says how many rows it covers; progress goes to stderr."""
        if action == "archive":
            partitions.do_audit_archive(self.stdout, actor=actor, before=before, out_dir=out_dir)
            return
        if archive is not None:
            if action != "verify" or after is not None or tenant is not None:
                raise CommandError("INVALID_ARGUMENT: --archive goes with verify alone", returncode=2)
            partitions.do_audit_verify_archive(self.stdout, path=archive)
            return
        if action == "seal":
            made = audit_seal_now()
            by_tenant: dict = {}
            for seal in made:
                by_tenant.setdefault(seal.tenant, []).append(seal)
            self.stdout.write(
                f"sealed {len(by_tenant)} tenant(s)"
                + "".join(
                    f"\n  {tenant} seal #{seals[-1].seq}: {sum(s.chains for s in seals)} chain head(s)"
                    + (f" in {len(seals)} seals" if len(seals) > 1 else "")
                    for tenant, seals in by_tenant.items()
                )
            )
            return
        if action == "seals":
            for seal in audit_seals(tenant=tenant):
                self.stdout.write(json.dumps(seal, sort_keys=True))
            return
        if after is not None and tenant is not None:
            raise CommandError(
                "INVALID_ARGUMENT: --after verifies every tenant's rows after that id; drop --tenant", returncode=2
            )
        began, rows, last_report = time.monotonic(), [0], [0.0]

        def progress(p):  # reported in order under a lock: the last report counts every row
            rows[0] = p.rows
            if p.seconds - last_report[0] >= 1.0:  # about once a second
                last_report[0] = p.seconds
                self.stderr.write(f"checked {p.rows:,} rows ({p.rows_per_second:,.0f} rows/s)")
                self.stderr.flush()

        if after is not None:
            bad, seals = audit_verify(after_id=after, progress=progress), []
        else:
            check = audit_check(tenant=tenant, progress=progress)
            bad, seals = check.first_bad, check.seals
        seconds, (count,) = time.monotonic() - began, rows
        checked = f"{count:,} row{'' if count == 1 else 's'} in {seconds:.1f} s"
        if count and seconds > 0:
            checked += f", {count / seconds:,.0f} rows/s"
        if bad is not None or seals:
            lines = ([f"TAMPERED: {bad}"] if bad is not None else []) + [f"SEAL: {problem}" for problem in seals]
            raise CommandError("\n".join(lines) + f" (checked {checked})", returncode=3)
        scope = (
            "every chain is intact" + (f" in {tenant}" if tenant else "") + ", and so is every seal"
            if after is None
            else f"every row after #{after} is intact"
        )
        self.stdout.write(f"audit trail verified: {scope} ({checked})")

    def do_supervise(self, *, once, interval, **_):
        from runtime.worker import executor, supervisor

        def report(sweep):
            if any(sweep.as_dict().values()):
                self.stdout.write(json.dumps(sweep.as_dict()))
                self.stdout.flush()

        supervisor.supervise(supervisor_id=executor.worker_id(), interval=interval, once=once, on_report=report)

    def do_pools(self, *, after, **_):
        page = pool_usage(after=after)
        rows = [[u.pool.name, u.pool.max_running, u.pool.max_queued, u.running, u.queued, u.slots_held] for u in page]
        self.stdout.write(table(["pool", "max_running", "max_queued", "running", "queued", "slots_held"], rows))
        self._next(page)

    def do_pool(self, *, actor, name, max_running, max_queued, **_):
        pool = pool_set_limits(name=name, actor=actor, max_running=max_running, max_queued=max_queued)
        self.stdout.write(str(pool))

    def do_pool_create(self, *, actor, name, max_running, max_queued, note, **_):
        pool = pool_create(name=name, max_running=max_running, max_queued=max_queued, actor=actor, note=note)
        self.stdout.write(f"created {pool}")

    def do_pool_remove(self, *, actor, name, note, **_):
        pool_remove(name=name, actor=actor, note=note)
        self.stdout.write(f"removed pool {name}")

    def do_agents(self, **_):
        rows = [[a.name, a.pool or "default", short(a.description, 70)] for a in agents.registered()]
        self.stdout.write(table(["agent", "pool", "description"], rows))

    def do_budgets(self, **options):
        budgets.show(self.stdout, **options)

    def do_budget_set(self, **options):
        budgets.set_budget(self.stdout, **options)

    def do_retention(self, **options):
        lifecycle.retention(self.stdout, **options)

    def do_erase(self, **options):
        lifecycle.erase(self.stdout, **options)

    def do_quotas(self, **options):
        budgets.quotas(self.stdout, **options)

    def do_quota_set(self, **options):
        budgets.set_quota(self.stdout, **options)

    def do_quota_remove(self, **options):
        budgets.remove_quota(self.stdout, **options)

    def do_grants(self, **options):
        grants.run(self.stdout, **options)

    def do_workers(self, **options):
        workers.run(self.stdout, **options)

    def do_memory(self, **options):
        memory.run(self.stdout, **options)

    def do_approvals(self, **options):
        approvals.run(self.stdout, **options)

    def do_schedules(self, **options):
        triggers.schedules(self.stdout, **options)

    def do_webhooks(self, **options):
        triggers.webhooks(self.stdout, **options)

    def do_dependencies(self, **options):
        triggers.dependencies(self.stdout, **options)

    def _next(self, page) -> None:
        """The cursor of the next page, if there is one: pass it back with --after. A page
        filtered on more than its index covers may be short, or empty, and still have one."""
        if page.next is not None:
            self.stdout.write(f"next: {page.next}")

    def _section(self, title, headers, rows):
        self.stdout.write(f"\n{title}\n" + table(headers, rows))


class _Parser(CommandParser):
    """Usage errors (a wrong type, a missing or unknown argument, a bad choice) carry a
    stable code and exit 2, like every other refusal."""

    def error(self, message):
        if self.called_from_command_line:
            self.print_usage(sys.stderr)
            self.exit(2, f"{InvalidArgument.code}: {self.prog}: {message}\n")
        raise CommandError(f"{InvalidArgument.code}: {message}", returncode=2)


CURSOR_MAX = 500

# Checks by option name, run before any command touches the database. The services check
# the same things again (they are the API's entry points too); checking here first means
# the list commands refuse a bad filter instead of running a query with it.
_CHECKS = {
    "actor": arguments.actor,
    "owner": lambda value: arguments.actor(value, "owner"),
    "tenant": arguments.tenant,
    "agent": arguments.agent_name,
    "key": arguments.idempotency_key,
    "pool": arguments.pool_name,
    "name": arguments.pool_name,
    "task": arguments.task_id_prefix,
    "parent": arguments.task_id_prefix,
    "root": arguments.task_id_prefix,
    "effect": arguments.effect_id,
    # A cursor is opaque (runtime/paging.py decodes and checks it); an audit id is a count.
    "after": lambda value: (
        arguments.text("--after", value, max_length=CURSOR_MAX)
        if isinstance(value, str)
        else arguments.bounded("--after", value, minimum=0, maximum=2**63 - 1)
    ),
    "note": lambda value: arguments.text("--note", value),
    "reason": lambda value: arguments.text("--reason", value),
    "principal": lambda value: arguments.actor(value, "--principal"),
    "resource": lambda value: arguments.text("--resource", value, max_length=500),
    "expires": lambda value: arguments.text("--expires", value, max_length=64),
    "limit": lambda value: arguments.bounded("--limit", value, minimum=1, maximum=arguments.PAGE_MAX),
    "wait": lambda value: arguments.bounded("--wait", value, minimum=0, maximum=WAIT_MAX_SECONDS, integer=False),
    "interval": lambda value: arguments.bounded(
        "--interval", value, minimum=INTERVAL_MIN_SECONDS, maximum=INTERVAL_MAX_SECONDS, integer=False
    ),
}


def _check_arguments(**options) -> None:
    for name, value in options.items():
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # argv bytes that were not UTF-8 arrive as lone surrogates
                raise InvalidEncoding(f"--{name.replace('_', '-')} is not UTF-8 text", field=name) from None
        check = _CHECKS.get(name)
        if check is not None and value is not None:
            check(value)


def _limits(given: list[str]) -> dict:
    """`--limit max_steps=500 --limit max_depth=4`: each NAME=N, checked by the service
    (task_resume: arguments.breaker_limits). A value that is not an integer is handed on
    as text, which the service refuses as ARGUMENT_OUT_OF_RANGE, naming the limit."""
    limits = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep:
            raise InvalidArgument(f"--limit takes NAME=N, got {arguments.show(item)}", field="limit")
        # ASCII digits only, and few: int() refuses 4,300 digits and takes "٣" for 3.
        limits[name.strip()] = int(value) if re.fullmatch(r"-?[0-9]{1,20}", value.strip()) else value
    return limits


def _task(value):
    """A TASK argument, whole or a unique prefix, as the id of the task it names."""
    return None if value is None else task_id_from_prefix(value)


def _json_arg(raw: str, flag: str, *, limit: int, setting: str):
    """JSON text given inline or as @file, parsed without risk (runtime/encoding.py)."""
    text: str | bytes = _read(raw[1:], flag, encoding.TEXT_SLACK * limit + 1) if raw.startswith("@") else raw
    return encoding.parse(text, what=flag, limit=limit, setting=setting)


def _read(path: str, flag: str, most: int) -> bytes:
    """At most `most` bytes of the file: enough for parse() to refuse a huge file (or
    /dev/zero) without reading all of it. Bytes, so that parse() decides about UTF-8."""
    try:
        with open(path, "rb") as handle:
            return handle.read(most)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = getattr(exc, "strerror", None) or str(exc)
        raise InvalidInput(f"cannot read {flag} file {path[:200]!r}: {reason}", field=flag) from None


def _reader_went_away() -> None:
    """`steward show ID | head` closed the pipe. Point stdout at /dev/null so that the
    interpreter's last flush cannot fail again, and exit without a traceback (Python's
    docs, "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(1)
