"""`manage.py steward versions|upgrade|upgrade-all|retire-version|patch`: agent versions
from a terminal (docs/adr/0037-agent-versions.md), through the same services and
selectors as the console and the API.

An upgrade replays the task's journal on the new code in this process: run it where the
new version is deployed (STEWARD_AGENT_MODULES as the workers')."""

from __future__ import annotations

from runtime.management.format import table
from runtime.tasks.selectors import task_get, task_id_from_prefix
from runtime.versions.selectors import patch_holdouts, version_overview
from runtime.versions.services import task_upgrade, version_retire, version_upgrade

TASK_HELP = "a task id, or enough of its start to name one task"


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "versions",
        help="agent versions: unfinished tasks per version, and the live workers that serve each",
        description="A version no live worker serves, with unfinished tasks, is marked `waiting`: "
        "its queued tasks wait for such a worker (they do not fail).",
    )
    p.add_argument("agent", nargs="?")
    p.add_argument("--tenant", required=True)

    p = sub.add_parser(
        "upgrade",
        help="move a task to another version of its agent, if its journal replays there",
        description="Refused with UPGRADE_DOES_NOT_REPLAY when a dry replay of its journal on the "
        "new code diverges (nothing changes), TASK_NOT_UPGRADABLE while it runs or once it "
        "finished, UPGRADE_RACED when an attempt claimed it meanwhile.",
    )
    p.add_argument("task", help=TASK_HELP)
    p.add_argument("--to", dest="version", default=None, help="the version (default: the current one here)")

    p = sub.add_parser("upgrade-all", help="upgrade every task of one agent version that replays on another")
    p.add_argument("agent")
    p.add_argument("--from", dest="from_version", required=True)
    p.add_argument("--to", dest="version", default=None, help="the version (default: the current one here)")
    p.add_argument("--tenant", required=True)

    p = sub.add_parser(
        "retire-version",
        help="retire an agent version no unfinished task runs: nothing is submitted under it again",
    )
    p.add_argument("agent")
    p.add_argument("version")

    p = sub.add_parser(
        "patch",
        help="for deprecating ctx.patched(NAME): unfinished tasks with and without its marker",
    )
    p.add_argument("agent")
    p.add_argument("name")
    p.add_argument("--tenant", required=True)


def do_versions(out, *, agent, tenant, **_) -> None:
    rows = [
        [
            row.agent,
            "(not started)" if row.version is None else row.version or "(before versions)",
            ", ".join(f"{n} {s}" for s, n in sorted(row.tasks.items())) or "-",
            "; ".join(row.workers) or "-",
            " ".join(
                word
                for word, on in (("current", row.current), ("retired", row.retired), ("waiting", row.waiting))
                if on
            )
            or "-",
        ]
        for row in version_overview(tenant=tenant, agent=agent)
    ]
    out.write(table(["agent", "version", "unfinished tasks", "served by", "state"], rows) + "\n")


def do_upgrade(out, *, actor, task, version, **_) -> None:
    found = task_get(task_id_from_prefix(task))
    done = task_upgrade(task_id=found.id, tenant=found.tenant, version=version, actor=actor)
    if done.from_version == done.to_version:
        out.write(f"{done.task_id}  already on version {done.to_version}\n")
        return
    out.write(
        f"{done.task_id}  upgraded {done.from_version or '(before versions)'} -> {done.to_version}"
        f"  ({done.replayed} journal rows replayed)\n"
    )


def do_upgrade_all(out, *, actor, agent, from_version, version, tenant, **_) -> None:
    done = version_upgrade(agent=agent, from_version=from_version, tenant=tenant, version=version, actor=actor)
    for up in done.upgraded:
        out.write(f"{up.task_id}  upgraded -> {up.to_version}\n")
    for task_id, code in sorted(done.refused.items()):
        out.write(f"{task_id}  refused: {code}\n")
    out.write(f"{len(done.upgraded)} upgraded, {len(done.refused)} refused\n")


def do_retire_version(out, *, actor, agent, version, **_) -> None:
    retired = version_retire(agent=agent, version=version, actor=actor)
    out.write(f"{agent} {version}  {'retired' if retired else 'was retired already'}\n")


def do_patch(out, *, agent, name, tenant, **_) -> None:
    counts = patch_holdouts(tenant=tenant, agent=agent, name=name)
    out.write(
        f"{agent} patch {name!r}: {counts['marked']} unfinished task(s) took its new path, "
        f"{counts['unmarked']} have no marker (they may need the old path)\n"
    )
    if counts["unmarked"] == 0:
        out.write("ctx.deprecate_patch() may replace ctx.patched() now\n")
