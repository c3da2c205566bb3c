"""Each fact has one source, and these tests hold the copies to it.

* Status names: runtime/states.py. The hand-written SQL (runtime/sql/ and the functions
  the database runs now) names statuses only from there, and each statement moves tasks
  only along transitions the table allows.
* An audit row's chain: steward_audit_chain() in the database (migration 0007), which
  the link trigger applies; no statement spells a chain, and every insert names only
  what happened.
* Error codes: runtime/errors.py, one code per class, each class raised somewhere.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.db import connection

from runtime import errors, states

REPO = Path(__file__).resolve().parents[2]
SQL = {path.name: path.read_text() for path in sorted((REPO / "runtime" / "sql").glob("*.sql"))}

STATUS_WORDS = set(states.TASK_STATUSES)
# A comparison or assignment of a task's status: `status = 'x'`, `c.status IN ('x', 'y')`.
COMPARED = re.compile(r"(?:\b(\w+)\.)?status\s*(=|<>|!=|IN|NOT IN)\s*(\([^)]*\)|'[a-z_]+')")
CHILDREN = "c"  # the alias every statement gives the children it reads (wake_due, wake_parent)
LITERAL = re.compile(r"'([a-z_]+)'")

# Which transitions each statement makes (states.TASK_TRANSITIONS): the statuses it
# compares and sets must be those events' sources and targets, and nothing else.
EVENTS = {
    "claim.sql": ["claim"],
    "attempt_end.sql": ["complete", "fail", "sleep", "wait", "block", "yield", "dead_letter"],
    "recover_expired.sql": ["recover", "dead_letter"],
    "wake_due.sql": ["wake"],
    "wake_parent.sql": ["wake"],
    "approval_expire_due.sql": ["decided"],
    "approval_decide.sql": ["decided"],
    "stop_tree.sql": ["stop"],
    "stop_begin.sql": ["stop"],
    "stop_settle.sql": ["cancel"],
    "tree_hold.sql": ["hold"],
    "tree_release.sql": ["release"],
    # Read only: whether any task of the tree is still live outside the stop.
    "tree_pause_close.sql": ["stop"],
    "pause_lifted.sql": ["release"],
    # Read only: what a tree's pause holds (blocked) and what still runs.
    "tree_pause_view.sql": ["pause"],
    # Read only: a fence matches the running attempt; the rest read by status.
    "fence.sql": ["complete"],
    "fence_update.sql": ["complete"],
    "step_insert.sql": ["complete"],
    "approval_check.sql": ["complete"],
    "attempt_release.sql": ["complete"],
    "release_abandoned.sql": ["complete"],
    "abandoned_attempts.sql": ["complete"],
    "stale_queued.sql": ["claim"],
    "pool_usage.sql": ["claim"],
    # Read only, of the tasks they read as `c` (a schedule's previous run, a trigger's prerequisites).
    "schedule_due.sql": [],
    "dependency_ready.sql": [],
}
# The named sets a statement may spell out as a list.
NAMED_SETS = {
    "TERMINAL": states.TERMINAL,
    "LIVE": states.LIVE,
    **{f"sources({event})": frozenset(states.sources(event)) for event in states.TASK_TRANSITIONS},
}


def _status_literals(text: str, *, moved_only: bool = False) -> list[tuple[str, frozenset[str]]]:
    """(operator, statuses) of each comparison; with moved_only, only those of the rows the
    statement moves (not the children it reads), a NOT IN standing for what it leaves out."""
    found = []
    for alias, op, rhs in COMPARED.findall(text):
        literals = frozenset(LITERAL.findall(rhs))
        if moved_only:
            if alias == CHILDREN:
                continue
            if op == "NOT IN":
                literals = frozenset(STATUS_WORDS) - literals
        found.append((op, literals))
    return found


def _live_functions() -> dict[str, str]:
    """The source of every steward_* function the database runs now (the latest migration's)."""
    with connection.cursor() as cur:
        cur.execute("SELECT proname, prosrc FROM pg_proc WHERE proname LIKE 'steward\\_%'")
        return dict(cur.fetchall())


@pytest.mark.parametrize("name", sorted(SQL))
def test_every_status_a_statement_names_is_a_status_of_states_py(name):
    for _, literals in _status_literals(SQL[name]):
        assert literals <= STATUS_WORDS, (name, literals - STATUS_WORDS)


def test_every_status_a_database_function_names_is_a_status_of_states_py(db):
    functions = _live_functions()
    assert "steward_submit" in functions and "steward_audit_link" in functions
    for name, source in functions.items():
        for _, literals in _status_literals(source):
            assert literals <= STATUS_WORDS, (name, literals - STATUS_WORDS)


def test_every_list_of_statuses_is_a_set_states_py_names():
    """`NOT IN ('completed', 'failed', 'cancelled')` typed by hand must be TERMINAL, not a
    copy that drifts when a status is added."""
    named = set(NAMED_SETS.values())
    for name, text in SQL.items():
        for op, literals in _status_literals(text):
            if len(literals) > 1:
                assert literals in named, (name, op, sorted(literals))


@pytest.mark.parametrize("name", sorted(EVENTS))
def test_a_statement_moves_tasks_only_along_the_transitions_it_implements(name):
    events = EVENTS[name]
    allowed = set().union(*(states.TASK_TRANSITIONS[e][0] | {states.TASK_TRANSITIONS[e][1]} for e in events))
    seen = set().union(*(literals for _, literals in _status_literals(SQL[name], moved_only=True)))
    assigned = set(re.findall(r"(?:SET status = |THEN |ELSE )'([a-z_]+)'", SQL[name]))
    assert seen | (assigned & STATUS_WORDS) <= allowed, (name, sorted((seen | assigned) - allowed))


def test_every_statement_with_a_status_is_accounted_for():
    """A new statement that compares statuses joins EVENTS above, so it is checked."""
    unaccounted = {name for name, text in SQL.items() if _status_literals(text) and name not in EVENTS}
    assert unaccounted == set()


# --- the audit chain and the audit insert --------------------------------------------


def test_no_statement_spells_a_chain_name():
    for name, text in SQL.items():
        assert "'task:'" not in text and "'tenant:'" not in text, name


def test_the_chain_name_is_defined_once_and_every_row_is_filed_by_it(db):
    functions = _live_functions()
    definitions = [name for name, source in functions.items() if "'task:'" in source]
    assert definitions == ["steward_audit_chain"]
    assert "steward_audit_chain(NEW.task_id, NEW.tenant)" in functions["steward_audit_link"]


INSERT = re.compile(r"INSERT INTO steward_audit\s*\(([^)]*)\)")


def test_every_audit_insert_names_only_what_happened(db):
    """The trigger sets chain, chain_seq, at, prev_hash and hash: an insert that named
    them would be a second definition of what the trigger decides."""
    sources = {**SQL, **{f"{name}()": src for name, src in _live_functions().items()}}
    inserts = [(name, columns) for name, text in sources.items() for columns in INSERT.findall(text)]
    assert len(inserts) >= 9
    for name, columns in inserts:
        assert [c.strip() for c in columns.split(",")] == ["actor", "tenant", "task_id", "kind", "data"], name


# --- error codes ---------------------------------------------------------------------------


def _error_classes() -> list[type]:
    found = []
    for value in vars(errors).values():
        if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == errors.__name__:
            found.append(value)
    return found


def test_every_error_an_operator_or_client_can_see_has_a_code_of_its_own():
    coded = [cls for cls in _error_classes() if issubclass(cls, errors.StewardError) and cls is not errors.StewardError]
    codes = [cls.code for cls in coded]
    assert "STEWARD_ERROR" not in codes
    assert len(codes) == len(set(codes)), sorted(c for c in codes if codes.count(c) > 1)
    for cls in _error_classes():
        if cls not in (errors.StewardError, errors.Suspend, errors.EffectNotApplied):
            assert re.fullmatch(r"[A-Z][A-Z_]+", getattr(cls, "code", "")), cls


def _raised_names() -> set[str]:
    """Every name raised (or subclassed) anywhere in runtime/ and console/, outside errors.py."""
    names = set()
    for path in [*REPO.glob("runtime/**/*.py"), *REPO.glob("console/**/*.py")]:
        if path.name == "errors.py" or "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                names.add(getattr(target, "id", getattr(target, "attr", "")))
            elif isinstance(node, ast.Name | ast.Attribute) and isinstance(getattr(node, "ctx", None), ast.Load):
                names.add(getattr(node, "id", getattr(node, "attr", "")))
    return names


def test_no_error_class_is_one_that_nothing_raises():
    used = _raised_names()
    never = [
        cls.__name__
        for cls in _error_classes()
        if cls.__name__ not in used and not any(sub.__name__ in used for sub in cls.__subclasses__())
    ]
    assert never == []


def test_nothing_raises_a_bare_steward_error():
    for path in [*REPO.glob("runtime/**/*.py"), *REPO.glob("console/**/*.py")]:
        assert "raise StewardError(" not in path.read_text(), path
