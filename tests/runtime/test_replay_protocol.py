"""The replay protocol's one seam (runtime/attempts/journal.py): every journaled Context
call gets a JournalCall from Context._next and goes through replay_or_run, and nothing
else in runtime/ branches on whether a call was recorded. mypy holds the types
(`make lint`, pyproject.toml [tool.mypy]); docs/testing.md names what it leaves out."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from runtime.attempts.journal import JournalCall, Recorded, replay_or_run
from runtime.states import StepKind

REPO = Path(__file__).resolve().parents[2]

# Each Context call and the module whose function takes its JournalCall through the helper.
CALLS = {
    "step": "runtime/worker/context.py",
    "now": "runtime/worker/context.py",
    "random": "runtime/worker/context.py",
    "effect": "runtime/worker/context.py",
    "model": "runtime/gateway/client.py",
    "tool": "runtime/gateway/client.py",
    "spawn": "runtime/tasks/children.py",
    "wait": "runtime/tasks/children.py",
    "sleep": "runtime/attempts/timers.py",
    "request": "runtime/approvals/request.py",
}


def test_a_recorded_call_is_replayed_and_a_new_one_run():
    recorded = Recorded(3, "fetch", StepKind.STEP, {"n": 1}, None)
    seen = []
    assert replay_or_run(
        JournalCall(3, "fetch", StepKind.STEP, recorded), replay=lambda r: r.output, run=seen.append
    ) == {"n": 1}
    assert seen == []
    new = JournalCall(4, "fetch", StepKind.STEP)
    assert replay_or_run(new, replay=lambda r: pytest.fail("nothing was recorded"), run=lambda c: c.seq) == 4


def _functions(path: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse((REPO / path).read_text())
    return {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_journaled_call_goes_through_replay_or_run(name):
    """The function itself, or the one it hands its JournalCall to, calls the helper."""
    functions = _functions(CALLS[name])
    source = ast.unparse(functions[name])
    assert "replay_or_run(" in source or any(
        f"{module}.{name}(" in source for module in ("ledger", "gateway", "children", "timers", "approvals")
    ), name
    if CALLS[name] != "runtime/worker/context.py":
        assert "replay_or_run(" in source, name
        assert "call: JournalCall" in source or "check: JournalCall" in source, name


def test_nothing_else_branches_on_whether_a_call_was_recorded():
    """A `recorded is None` test outside the helper would be a second replay protocol."""
    found = []
    for path in sorted((REPO / "runtime").rglob("*.py")):
        if path.name == "journal.py" and path.parent.name == "attempts":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            # (`assert checked is not None`: approval_check's row, a statement's answer.)
            if re.search(r"\b(recorded|checked|\w+\.recorded) is (not )?None", line) and "assert" not in line:
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert found == []


def test_the_type_checker_runs_in_make_lint_and_docs_name_what_it_leaves_out():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["files"] == ["runtime"]
    left_out = {m for o in config.get("overrides", []) for m in o["module"] if o.get("ignore_errors")}
    lint = (REPO / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "$(VENV)/bin/mypy" in lint
    text = (REPO / "docs" / "testing.md").read_text()
    section = text[text.index("## Type checks") :]
    section = section[: section.index("\n## ", 1)]
    assert set(re.findall(r"`(runtime\.[\w.]+)`", section)) == left_out
    # The replay protocol's modules are checked.
    for module in (
        "runtime.attempts.journal",
        "runtime.attempts.context",
        "runtime.worker.context",
        "runtime.effects.ledger",
        "runtime.gateway.client",
        "runtime.attempts.timers",
        "runtime.tasks.children",
        "runtime.approvals.request",
        "runtime.tasks.actions",
    ):
        assert module not in left_out, module
