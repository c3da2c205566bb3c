"""docs/state-machines.md draws runtime/states.py; this keeps the two in step.

Each Mermaid block names the table it draws in a `%% NAME` comment; its edges must be
exactly the (source, target, event) triples of that table. Each status list must hold
exactly the statuses of its group, each with the one-line meaning from its comment in
states.py. No database.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from runtime import states

DOC = Path(__file__).resolve().parents[2] / "docs" / "state-machines.md"
EDGE = re.compile(r"^(\S+) --> (\S+) : (\S+)$")
# Where a machine starts: not a transition of an existing row, so not in the tables.
STARTS = {
    "TASK_TRANSITIONS": ("[*]", states.QUEUED, "submit"),  # task_submit / ctx.spawn
    "EFFECT_TRANSITIONS": ("[*]", states.INTENT, "record"),  # effects._record_intent
    "APPROVAL_TRANSITIONS": ("[*]", states.PENDING, "request"),  # ctx.request_approval
}
LISTS = {  # heading in the doc -> the tuple in states.py it lists
    "Task statuses": "TASK_STATUSES",
    "Attempt reasons": "ATTEMPT_REASONS",
    "Effect states": "EFFECT_STATES",
    "Effect classes": "EFFECT_CLASSES",
    "Approval states": "APPROVAL_STATES",
}


def doc() -> str:
    return DOC.read_text()


def diagrams(text: str) -> dict[str, list[tuple[str, str, str]]]:
    """Each ```mermaid stateDiagram-v2 block, keyed by its `%% NAME` comment."""
    found = {}
    for block in re.findall(r"^```mermaid\n(.*?)^```", text, re.M | re.S):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        assert lines[0] == "stateDiagram-v2", f"not a state diagram: {lines[0]!r}"
        names = [line[2:].strip() for line in lines if line.startswith("%%")]
        assert len(names) == 1, f"a diagram names the table it draws in one `%% NAME` line: {names}"
        edges = []
        for line in lines[1:]:
            if line.startswith("%%"):
                continue
            match = EDGE.match(line)
            assert match, f"{names[0]}: not a `source --> target : event` line: {line!r}"
            edges.append(match.groups())
        found[names[0]] = edges
    return found


def from_code(table: dict[str, tuple[frozenset[str], str]]) -> set[tuple[str, str, str]]:
    return {(source, target, event) for event, (sources, target) in table.items() for source in sources}


def listed(text: str, heading: str) -> dict[str, str]:
    """The `- `value`: meaning` lines under a heading, up to the next heading."""
    match = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#|\Z)", text, re.M | re.S)
    assert match, f"no heading {heading!r} in {DOC.name}"
    items = re.findall(r"^- `([^`]+)`: (.+)$", match.group(1), re.M)
    values = [value for value, _ in items]
    assert len(values) == len(set(values)), f"{heading}: listed twice: {values}"
    return dict(items)


def meanings(group: str) -> dict[str, str]:
    """value -> its one-line comment, for the constants a tuple in states.py lists."""
    source = inspect.getsource(states)
    names = re.search(rf"^{group} = \(([^)]*)\)", source, re.M).group(1).replace(" ", "").split(",")
    comments = dict(re.findall(r'^([A-Z_]+) = "\w+" +# (.+?)\s*$', source, re.M))
    return {getattr(states, name): comments[name] for name in names}


@pytest.mark.parametrize("table", ["TASK_TRANSITIONS", "EFFECT_TRANSITIONS", "APPROVAL_TRANSITIONS"])
def test_the_diagram_draws_exactly_the_transitions_in_the_code(table):
    edges = diagrams(doc())[table]

    assert len(edges) == len(set(edges)), f"{table}: an edge is drawn twice"
    drawn = set(edges) - {STARTS[table]}
    assert STARTS[table] in edges, f"{table}: draw where the machine starts: {STARTS[table]}"
    code = from_code(getattr(states, table))
    assert drawn - code == set(), "drawn, but not in runtime/states.py"
    assert code - drawn == set(), "in runtime/states.py, but not drawn"


def test_the_doc_draws_one_diagram_per_table():
    assert sorted(diagrams(doc())) == sorted(STARTS)


def test_each_diagram_draws_every_status_of_its_machine():
    drawn = diagrams(doc())
    for table, group in (
        ("TASK_TRANSITIONS", states.TASK_STATUSES),
        ("EFFECT_TRANSITIONS", states.EFFECT_STATES),
        ("APPROVAL_TRANSITIONS", states.APPROVAL_STATES),
    ):
        nodes = {node for source, target, _ in drawn[table] for node in (source, target)} - {"[*]"}
        assert nodes == set(group), table


@pytest.mark.parametrize("heading, group", sorted(LISTS.items()))
def test_the_doc_lists_every_status_with_its_meaning_from_the_code(heading, group):
    assert listed(doc(), heading) == meanings(group)
    assert list(listed(doc(), heading)) == list(getattr(states, group)), "listed in the code's order"


def test_the_doc_says_who_performs_every_event():
    text = doc()
    for table in STARTS:
        for event in getattr(states, table):
            assert f"`{event}`" in text, f"{table}: the prose never mentions `{event}`"
