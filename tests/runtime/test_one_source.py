"""Each fact has one source, and these tests hold the copies to it.

* Status names: runtime/states.py. The hand-written SQL (runtime/sql/ and the functions
  the database runs now) names statuses only from there, and each statement moves tasks
  only along transitions the table allows.
* An audit row's chain: steward_audit_chain() in the database (migration 0007), which
  the link trigger applies; no statement spells a chain, and every insert names only
  what happened.
* Error codes: runtime/errors.py, one code per class, each class raised somewhere.
* Vocabularies, each one StrEnum: audit kinds (runtime/audit.py AuditKind), the events of
  the three state machines, step kinds and stop outcomes (runtime/states.py). Every kind
  written anywhere, by Python or by a statement or database function, is a member, and
  every member is written somewhere; docs/api.md lists the audit kinds with their
  meanings; runtime code names an event or a step kind by its member, never by its text.
* What an operator may do to a task (resume, stop, rerun) and why not: task_actions
  (runtime/tasks/actions.py), from the transition table. The console's views and
  templates, the API and the CLI ask it; none compares a task's status or blocked reason
  itself, nor reads the transition table.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.db import connection

from runtime import errors, states
from runtime.audit import AuditKind

REPO = Path(__file__).resolve().parents[2]
SQL = {path.name: path.read_text() for path in sorted((REPO / "runtime" / "sql").glob("*.sql"))}
# The current text of every database function (runtime/sql/schema/, held to the database).
FUNCTIONS = {path.name: path.read_text() for path in sorted((REPO / "runtime" / "sql" / "schema").glob("*.sql"))}

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
    # Read only: the dashboard's version counts each pool's running tasks as pool_usage.sql does.
    "dashboard_version.sql": ["claim"],
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


# --- vocabularies --------------------------------------------------------------------------

KIND = re.compile(r"'([a-z_]+\.[a-z_]+)'")
# A kind made from the row's new status or state: 'task.' || moved.status.
MADE = re.compile(r"'([a-z_]+\.)'\s*\|\|\s*\w+\.(status|state)\b")
# What such a kind can be, per statement: the targets of the transitions it makes.
MADE_FROM = {
    "attempt_end.sql": {states.target(e) for e in EVENTS["attempt_end.sql"]},
    "approval_check.sql": {
        states.target(e, states.APPROVAL_TRANSITIONS)
        for e in (states.ApprovalEvent.INVALIDATE, states.ApprovalEvent.CONSUME)
    },
    "approval_decide.sql": {
        states.target(e, states.APPROVAL_TRANSITIONS)
        for e in (
            states.ApprovalEvent.APPROVE,
            states.ApprovalEvent.DENY,
            states.ApprovalEvent.EXPIRE,
            states.ApprovalEvent.OUTDATE,
        )
    },
}


def _inserts(text: str, table: str) -> list[str]:
    """The text of each INSERT INTO `table` in a statement or function: up to the end of
    its CTE (a `)` at the start of a line) or its `;`."""
    found = []
    for match in re.finditer(rf"INSERT INTO {table}\b", text):
        rest = text[match.start() :]
        ends = [i for i in (rest.find("\n)"), rest.find(";")) if i >= 0]
        found.append(rest[: min(ends)] if ends else rest)
    return found


def _sql_kinds() -> dict[str, set[str]]:
    """Every audit kind each statement and function writes, its made ones spelled out."""
    kinds: dict[str, set[str]] = {}
    for name, text in {**SQL, **FUNCTIONS}.items():
        for insert in _inserts(text, "steward_audit"):
            written = kinds.setdefault(name, set())
            written |= set(KIND.findall(insert))
            for prefix, _ in MADE.findall(insert):
                assert name in MADE_FROM, f"{name} makes a kind from a status: say which in MADE_FROM"
                written |= {prefix + value for value in MADE_FROM[name]}
    return kinds


def _python_trees() -> dict[str, ast.AST]:
    paths = [*REPO.glob("runtime/**/*.py"), *REPO.glob("console/**/*.py")]
    return {str(p.relative_to(REPO)): ast.parse(p.read_text()) for p in paths if "migrations" not in p.parts}


def _members_named(enum: str) -> set[str]:
    """The members of `enum` (a class name) that Python code names: Enum.MEMBER."""
    named = set()
    for tree in _python_trees().values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name | ast.Attribute):
                owner = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
                if owner == enum:
                    named.add(node.attr)
    return named


def test_every_audit_kind_a_statement_or_function_writes_is_in_the_catalogue():
    written = _sql_kinds()
    assert {"claim.sql", "attempt_end.sql", "steward_submit.sql"} <= written.keys()
    for name, kinds in written.items():
        assert kinds <= set(AuditKind), (name, sorted(kinds - set(AuditKind)))


def test_python_writes_audit_kinds_only_by_their_members():
    """No kind spelled as text, nor made with an f-string, where an audit row is written
    (`kind=` of audit_append, audit_record, audit_record_once; the ledger's `audit_kind=`)."""
    spelled = []
    for path, tree in _python_trees().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            for keyword in node.keywords:
                value = keyword.value
                text = isinstance(value, ast.Constant) and isinstance(value.value, str) and "." in value.value
                if keyword.arg in ("kind", "audit_kind") and (text or isinstance(value, ast.JoinedStr)):
                    spelled.append(f"{path}:{node.lineno}")
    assert spelled == []


def test_every_audit_kind_is_written_somewhere():
    """The catalogue holds no kind that nothing writes: each member is named by Python
    code or written by a statement or function."""
    named = _members_named("AuditKind")
    assert named <= set(AuditKind.__members__), sorted(named - set(AuditKind.__members__))
    written = {AuditKind[m] for m in named} | set().union(*_sql_kinds().values())
    assert sorted(set(AuditKind) - written) == []


def _comments(path: str, enum: str) -> dict[str, str]:
    """Each member's value and the comment on its line, from the enum's source."""
    source = (REPO / path).read_text()
    body = source[source.index(f"class {enum}(StrEnum):") :]
    body = body[: body.index("\n\n\n")] if "\n\n\n" in body else body
    return dict(re.findall(r'^    [A-Z_]+ = "([^"]+)"  # (.+)$', body, re.M))


def test_every_member_of_every_vocabulary_says_what_it_means():
    for path, enum, members in [
        ("runtime/audit.py", "AuditKind", AuditKind),
        ("runtime/states.py", "TaskEvent", states.TaskEvent),
        ("runtime/states.py", "ApprovalEvent", states.ApprovalEvent),
        ("runtime/states.py", "EffectEvent", states.EffectEvent),
        ("runtime/states.py", "StepKind", states.StepKind),
        ("runtime/states.py", "StopOutcome", states.StopOutcome),
    ]:
        assert sorted(_comments(path, enum)) == sorted(m.value for m in members), enum


def test_docs_api_lists_every_audit_kind_with_its_meaning():
    """docs/api.md's table of audit kinds is AuditKind: the same kinds, in the same order,
    each with its member's comment as its meaning."""
    text = (REPO / "docs" / "api.md").read_text()
    section = text[text.index("## Audit kinds") :]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    rows = re.findall(r"^\| `([a-z_.]+)` \| (.+?) \|$", section, re.M)
    assert [kind for kind, _ in rows] == [m.value for m in AuditKind]
    assert dict(rows) == _comments("runtime/audit.py", "AuditKind")


# Where runtime code names an event of a state machine or a step kind.
EVENT_ARGUMENTS = {
    "sources": 0,  # states.sources(event, table)
    "target": 0,  # states.target(event, table)
    "end_attempt": 1,  # end_attempt(lease, event, ...)
    "_end": 2,  # the executor's _end(claim, then_claim, event, ...)
    "_settle": 2,  # the ledger's _settle(call, row, event, ...)
    "_next": 1,  # Context._next(name, kind)
    "JournalCall": 2,  # JournalCall(seq, name, kind, recorded)
}


def test_runtime_code_names_events_and_step_kinds_by_their_members():
    spelled = []
    for path, tree in _python_trees().items():
        if not path.startswith("runtime/"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                at = EVENT_ARGUMENTS.get(func)
                given = [node.args[at]] if at is not None and len(node.args) > at else []
                given += [k.value for k in node.keywords if func == "write" and k.arg == "kind"]  # journal.write
                for arg in given:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        spelled.append(f"{path}:{node.lineno}: {func}({arg.value!r})")
            elif (
                isinstance(node, ast.Subscript)
                and getattr(node.value, "attr", "") == "BLOCKED_BY"
                and isinstance(node.slice, ast.Constant)
            ):
                spelled.append(f"{path}:{node.lineno}: BLOCKED_BY[{node.slice.value!r}]")
    assert spelled == []


def test_every_step_kind_is_journaled_somewhere_and_statements_journal_only_step_kinds():
    in_sql = set()
    for text in SQL.values():
        for insert in _inserts(text, "steward_step"):
            in_sql |= set(LITERAL.findall(insert)) - STATUS_WORDS
    assert in_sql <= set(states.StepKind), sorted(in_sql - set(states.StepKind))
    named = _members_named("StepKind")
    assert sorted(set(states.StepKind) - {states.StepKind[m] for m in named} - in_sql) == []


def test_a_stop_ends_only_in_its_outcomes():
    settle = SQL["stop_settle.sql"]
    written = set(re.findall(r"(?:THEN|ELSE) '([a-z_]+)'", settle[settle.index("outcome = CASE") :]))
    assert written <= set(states.StopOutcome) and written | {
        states.StopOutcome[m] for m in _members_named("StopOutcome")
    } == set(states.StopOutcome)


# --- what an operator may do to a task -----------------------------------------------------

# Where the console, the API and the CLI decide what to show and offer (console/dev is the
# demo's own watcher, not an operator's surface).
SURFACES = ["console/ui", "console/api", "console/templatetags", "runtime/management"]
TASK_FIELDS = {"status", "blocked_reason"}
# The rules' own sources: a surface that reads them is deriving an answer again.
RULE_NAMES = {"TASK_TRANSITIONS", "BLOCKED_BY", "RESUMABLE_BLOCKS", "sources", "target"}
TASK_WORDS = STATUS_WORDS | set(states.BLOCKED_REASONS)


def _is_task_field(node: ast.AST) -> bool:
    """`task.status`, `t.blocked_reason`, `row["status"]`."""
    if isinstance(node, ast.Attribute):
        return node.attr in TASK_FIELDS
    return isinstance(node, ast.Subscript) and getattr(node.slice, "value", None) in TASK_FIELDS


def _names_a_task_word(node: ast.AST) -> bool:
    """`states.BLOCKED`, `states.LIVE - {...}`, `"cancelled"`: a status, a reason or a set of them."""
    for part in ast.walk(node):
        if isinstance(part, ast.Attribute) and getattr(part.value, "id", "") == "states":
            return True
        if isinstance(part, ast.Constant) and part.value in TASK_WORDS:
            return True
    return False


def _derived_in_python(root: Path) -> list[str]:
    found = []
    for surface in SURFACES:
        for path in sorted((root / surface).rglob("*.py")):
            where = str(path.relative_to(root))
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Compare):
                    sides = [node.left, *node.comparators]
                    if any(_is_task_field(side) for side in sides) and any(_names_a_task_word(s) for s in sides):
                        found.append(f"{where}:{node.lineno}: compares a task's {ast.unparse(node)}")
                elif (
                    isinstance(node, ast.Attribute)
                    and getattr(node.value, "id", "") == "states"
                    and node.attr in RULE_NAMES
                ) or (isinstance(node, ast.Name) and node.id in RULE_NAMES - {"sources", "target"}):
                    found.append(f"{where}:{node.lineno}: reads {ast.unparse(node)}")
    return found


# `{% if task.status == "stopping" %}`, `child.status in stoppable`: a template comparing a
# task's status or blocked reason to a value, or testing it against a set. A list's filter
# form (`filters.status`) holds what the operator typed, not a task's status.
TEMPLATE_COMPARED = re.compile(r"([\w.]*)\b(status|blocked_reason)\s*(==|!=|not in|in)\s*([\"']?)([\w.]+)\4")
NOT_A_TASK = ("filters.",)


def _derived_in_templates(root: Path) -> list[str]:
    found = []
    for path in sorted((root / "templates").rglob("*.html")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in TEMPLATE_COMPARED.finditer(line):
                owner, _, op, _, value = match.groups()
                if owner.startswith(NOT_A_TASK):
                    continue
                if value in TASK_WORDS or "in" in op:
                    found.append(f"{path.relative_to(root)}:{number}: {match.group(0)}")
    return found


def test_the_console_the_api_and_the_cli_ask_task_actions_and_derive_nothing():
    """Each surface asks runtime/tasks/actions.py what an operator may do and what a
    task's status means for the page; none compares a status or reads the transition
    table itself (views, API schemas, template filters, the CLI)."""
    assert _derived_in_python(REPO) == []
    for surface, module in [
        ("console/ui/task.py", "task_actions"),
        ("console/api/tasks.py", "task_actions"),
        ("runtime/management/commands/steward.py", "task_actions"),
        ("console/templatetags/steward.py", "task_actions"),
    ]:
        assert module in (REPO / surface).read_text(), surface


def test_no_template_compares_a_task_status():
    assert _derived_in_templates(REPO) == []
