"""Hostile arguments to `manage.py steward`: every command, with arguments that are huge,
deep, malformed, in the wrong encoding, out of range, over-long or of the wrong type.
Each is refused with exit code 2 and its stable code on stderr, prints no traceback,
and changes no table.

The table runs through Django's real entry point (execute_from_command_line, as
manage.py calls it) in this process, for speed; the rows at the end run manage.py as a
real process, as an operator's shell does, including `steward show ID | head`.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from unittest import mock

import pytest
from django.conf import settings
from django.core.management import execute_from_command_line
from django.db import connections

from runtime.limits.services import pool_create
from runtime.models import Effect, Task
from runtime.stops.services import task_stop
from runtime.tasks.services import task_submit
from tests.harness import REPO
from tests.runtime.test_cli import ALICE, blocked_task_with_unknown_effect
from tests.snapshot import snapshot

LIMIT = settings.STEWARD["MAX_INPUT_BYTES"]
NOT_UTF8 = "caf\udce9"  # how Python hands over the argv bytes b"caf\xe9" (surrogateescape)
DEEP_980 = '{"a": ' + "[" * 980 + "]" * 980 + "}"  # the input that poisoned a worker (issue 5)
DEEP_100K = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
DEEP_65 = '{"a": ' + "[" * 64 + "]" * 64 + "}"  # one level past encoding.MAX_DEPTH
DIGITS = "1" * 5000  # past Python's 4,300-digit limit for int <-> str


@dataclass
class Ran:
    code: int
    out: str
    err: str


def manage(*argv: str) -> Ran:
    """`manage.py steward ARGV`, through the same entry point manage.py calls, in this
    process. run_from_argv closes every connection when it ends; that would end the
    test's transaction, so that one call is stubbed."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), mock.patch.object(connections, "close_all"):
        try:
            execute_from_command_line(["manage.py", "steward", *argv])
        except SystemExit as exit_:
            code = exit_.code
    return Ran(code, out.getvalue(), err.getvalue())


@pytest.fixture
def world(db, tmp_path):
    """Something for every command to point at: a pool with a task, an empty pool, a
    blocked task with an unknown effect, and input files."""
    pool_create(name="batch", max_running=2, max_queued=5, actor="user:alice")
    pool_create(name="empty", max_running=1, max_queued=1, actor="user:alice")
    queued = task_submit(agent="t.steps", input={"n": 1}, pool="batch", **ALICE).task_id
    blocked, effect = blocked_task_with_unknown_effect()
    cancelled = task_submit(agent="t.steps", input={"n": 2}, pool="batch", **ALICE).task_id
    task_stop(task_id=cancelled, actor="user:alice", reason="test")
    completed = task_submit(agent="t.steps", input={"n": 3}, pool="batch", **ALICE).task_id
    Task.objects.filter(id=completed).update(status="completed")
    _, settled = blocked_task_with_unknown_effect()
    Effect.objects.filter(id=settled.id).update(state="committed")
    files = {
        "latin1.json": b'{"city": "caf\xe9"}',
        "utf16.json": '{"n": 1}'.encode("utf-16"),
        "huge.json": b'{"blob": "' + b"x" * (5 * LIMIT) + b'"}',
        "deep.json": DEEP_980.encode(),
        "nul.json": b'{"a": "\\u0000"}',
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    # Tasks submitted together share the start of their (time-ordered) ids.
    shared = os.path.commonprefix([str(queued), str(blocked.id)])
    return {
        "task": str(queued),
        "blocked": str(blocked.id),
        "effect": str(effect.id),
        "tmp": str(tmp_path),
        "shared": shared,
        "cancelled": str(cancelled),
        "completed": str(completed),
        "settled": str(settled.id),
    }


# A valid call of every command, to which the bad --actor rows are added.
COMMANDS = {
    "submit": ["submit", "t.steps"],
    "tasks": ["tasks"],
    "show": ["show", "{task}"],
    "effects": ["effects"],
    "resolve-effect": ["resolve-effect", "{effect}", "--as", "failed"],
    "stop-summary": ["stop-summary", "{cancelled}"],
    "rerun": ["rerun", "{cancelled}", "--reason", "again"],
    "cancel": ["cancel", "{task}", "--reason", "not needed"],
    "resume": ["resume", "{task}"],  # after cancel: the good-arguments test resumes what it cancelled
    "stop": ["stop", "{task}", "--reason", "not needed"],  # after resume: it is queued again
    "agent-stop": ["agent-stop", "t.child", "--tenant", "acme", "--reason", "incident"],
    "agent-reopen": ["agent-reopen", "t.child", "--tenant", "acme"],
    "audit": ["audit", "verify"],
    "supervise": ["supervise", "--once"],
    "pools": ["pools"],
    "pool": ["pool", "batch", "--max-running", "3"],
    "pool-create": ["pool-create", "newpool", "--max-running", "1", "--max-queued", "1"],
    "pool-remove": ["pool-remove", "empty"],
    "agents": ["agents"],
    "grants": ["grants", "list", "--tenant", "acme"],
}
BAD_ACTORS = {
    "over-long": "u" * 201,
    "nul": "user:\x00alice",
    "newline": "user:alice\nuser:root",
    "not-utf8": NOT_UTF8,
    "empty": "",
}
ACTOR_CODE = {"not-utf8": "INVALID_ENCODING"}

ROWS = [
    (f"{command}-actor-{kind}", ["--actor", actor, *argv], ACTOR_CODE.get(kind, "INVALID_IDENTIFIER"))
    for command, argv in COMMANDS.items()
    for kind, actor in BAD_ACTORS.items()
] + [
    # submit: the input
    ("submit-input-deep-980", ["submit", "t.steps", "--input", DEEP_980], "INPUT_TOO_DEEP"),
    ("submit-input-deep-100k", ["submit", "t.steps", "--input", DEEP_100K], "INPUT_TOO_DEEP"),
    ("submit-input-deep-65", ["submit", "t.steps", "--input", DEEP_65], "INPUT_TOO_DEEP"),
    ("submit-input-deep-file", ["submit", "t.steps", "--input", "@{tmp}/deep.json"], "INPUT_TOO_DEEP"),
    ("submit-input-huge-text", ["submit", "t.steps", "--input", " " * (5 * LIMIT) + "{}"], "INPUT_TOO_LARGE"),
    ("submit-input-huge-value", ["submit", "t.steps", "--input", '{"b": "' + "x" * LIMIT + '"}'], "INPUT_TOO_LARGE"),
    ("submit-input-huge-file", ["submit", "t.steps", "--input", "@{tmp}/huge.json"], "INPUT_TOO_LARGE"),
    ("submit-input-dev-zero", ["submit", "t.steps", "--input", "@/dev/zero"], "INPUT_TOO_LARGE"),
    ("submit-input-malformed", ["submit", "t.steps", "--input", "{not json"], "INVALID_INPUT"),
    ("submit-input-empty", ["submit", "t.steps", "--input", ""], "INVALID_INPUT"),
    ("submit-input-array", ["submit", "t.steps", "--input", "[1, 2]"], "INVALID_INPUT"),
    ("submit-input-schema", ["submit", "research.batch", "--input", '{"experiments": 0}'], "INVALID_INPUT"),
    ("submit-input-nan", ["submit", "t.steps", "--input", '{"x": NaN}'], "NUMBER_OUT_OF_RANGE"),
    ("submit-input-1e400", ["submit", "t.steps", "--input", '{"x": 1e400}'], "NUMBER_OUT_OF_RANGE"),
    ("submit-input-2-63", ["submit", "t.steps", "--input", '{"n": 9223372036854775808}'], "NUMBER_OUT_OF_RANGE"),
    ("submit-input-digits", ["submit", "t.steps", "--input", '{"n": ' + DIGITS + "}"], "NUMBER_OUT_OF_RANGE"),
    ("submit-input-nul", ["submit", "t.steps", "--input", '{"a": "x\\u0000y"}'], "INVALID_STRING"),
    ("submit-input-nul-key", ["submit", "t.steps", "--input", '{"\\u0000": 1}'], "INVALID_STRING"),
    ("submit-input-nul-file", ["submit", "t.steps", "--input", "@{tmp}/nul.json"], "INVALID_STRING"),
    ("submit-input-surrogate", ["submit", "t.steps", "--input", '{"a": "\\ud800"}'], "INVALID_STRING"),
    ("submit-input-not-utf8", ["submit", "t.steps", "--input", '{"a": "' + NOT_UTF8 + '"}'], "INVALID_ENCODING"),
    ("submit-input-latin1-file", ["submit", "t.steps", "--input", "@{tmp}/latin1.json"], "INVALID_ENCODING"),
    ("submit-input-utf16-file", ["submit", "t.steps", "--input", "@{tmp}/utf16.json"], "INVALID_ENCODING"),
    ("submit-input-missing-file", ["submit", "t.steps", "--input", "@{tmp}/nonexistent.json"], "INVALID_INPUT"),
    ("submit-input-directory", ["submit", "t.steps", "--input", "@{tmp}"], "INVALID_INPUT"),
    ("submit-input-nul-path", ["submit", "t.steps", "--input", "@{tmp}/a\x00b"], "INVALID_INPUT"),
    # submit: the identifiers and numbers
    ("submit-agent-over-long", ["submit", "a" * 201], "INVALID_IDENTIFIER"),
    ("submit-agent-nul", ["submit", "t.steps\x00"], "INVALID_IDENTIFIER"),
    ("submit-agent-not-utf8", ["submit", NOT_UTF8], "INVALID_ENCODING"),
    ("submit-agent-unknown", ["submit", "no.such.agent"], "UNKNOWN_AGENT"),
    ("submit-tenant-over-long", ["submit", "t.steps", "--tenant", "t" * 101], "INVALID_IDENTIFIER"),
    ("submit-tenant-control", ["submit", "t.steps", "--tenant", "acme\x1b[2J"], "INVALID_IDENTIFIER"),
    ("submit-owner-over-long", ["submit", "t.steps", "--owner", "o" * 201], "INVALID_IDENTIFIER"),
    ("submit-key-over-long", ["submit", "t.steps", "--key", "k" * 201], "INVALID_IDENTIFIER"),
    ("submit-key-nul", ["submit", "t.steps", "--key", "k\x00"], "INVALID_IDENTIFIER"),
    ("submit-pool-bad-name", ["submit", "t.steps", "--pool", "bad pool!"], "INVALID_IDENTIFIER"),
    ("submit-pool-over-long", ["submit", "t.steps", "--pool", "p" * 101], "INVALID_IDENTIFIER"),
    ("submit-pool-unknown", ["submit", "t.steps", "--pool", "nosuch"], "UNKNOWN_POOL"),
    ("submit-wait-negative", ["submit", "t.steps", "--wait", "-1"], "ARGUMENT_OUT_OF_RANGE"),
    ("submit-wait-nan", ["submit", "t.steps", "--wait", "nan"], "ARGUMENT_OUT_OF_RANGE"),
    ("submit-wait-huge", ["submit", "t.steps", "--wait", "1e300"], "ARGUMENT_OUT_OF_RANGE"),
    ("submit-wait-wrong-type", ["submit", "t.steps", "--wait", "soon"], "INVALID_ARGUMENT"),
    ("submit-missing-agent", ["submit"], "INVALID_ARGUMENT"),
    ("submit-unknown-option", ["submit", "t.steps", "--bogus"], "INVALID_ARGUMENT"),
    # tasks
    ("tasks-limit-negative", ["tasks", "--limit", "-1"], "ARGUMENT_OUT_OF_RANGE"),
    ("tasks-limit-zero", ["tasks", "--limit", "0"], "ARGUMENT_OUT_OF_RANGE"),
    ("tasks-limit-huge", ["tasks", "--limit", "10" + "0" * 30], "ARGUMENT_OUT_OF_RANGE"),
    ("tasks-limit-digits", ["tasks", "--limit", DIGITS], "INVALID_ARGUMENT"),
    ("tasks-limit-wrong-type", ["tasks", "--limit", "1.5"], "INVALID_ARGUMENT"),
    ("tasks-status-unknown", ["tasks", "--status", "exploded"], "INVALID_ARGUMENT"),
    ("tasks-tenant-over-long", ["tasks", "--tenant", "t" * 101], "INVALID_IDENTIFIER"),
    ("tasks-agent-nul", ["tasks", "--agent", "t.\x00"], "INVALID_IDENTIFIER"),
    ("tasks-agent-not-utf8", ["tasks", "--agent", NOT_UTF8], "INVALID_ENCODING"),
    ("tasks-pool-bad-name", ["tasks", "--pool", "bad pool!"], "INVALID_IDENTIFIER"),
    # show
    ("show-malformed", ["show", "not-a-task"], "TASK_NOT_FOUND"),
    ("show-unknown", ["show", str(uuid.UUID(int=1))], "TASK_NOT_FOUND"),
    ("show-over-long", ["show", "f" * 100_000], "TASK_NOT_FOUND"),
    ("show-nul", ["show", "\x00"], "TASK_NOT_FOUND"),
    ("show-not-utf8", ["show", NOT_UTF8], "INVALID_ENCODING"),
    ("show-missing", ["show"], "INVALID_ARGUMENT"),
    # a task id prefix (every command that takes a task: runtime/tasks/selectors.py task_id_from_prefix)
    ("show-prefix-ambiguous", ["show", "{shared}"], "AMBIGUOUS_TASK_ID"),
    ("show-prefix-empty", ["show", ""], "TASK_NOT_FOUND"),
    ("show-prefix-not-hex", ["show", "01a2zz"], "TASK_NOT_FOUND"),
    ("show-prefix-too-long", ["show", "0" * 33], "TASK_NOT_FOUND"),
    ("show-prefix-canonical-too-long", ["show", "{task}0"], "TASK_NOT_FOUND"),
    ("show-prefix-hyphen-misplaced", ["show", "01a2-30af"], "TASK_NOT_FOUND"),
    ("show-prefix-matches-none", ["show", "0000"], "TASK_NOT_FOUND"),
    ("cancel-prefix-ambiguous", ["cancel", "{shared}", "--reason", "x"], "AMBIGUOUS_TASK_ID"),
    ("cancel-prefix-empty", ["cancel", "", "--reason", "x"], "TASK_NOT_FOUND"),
    ("resume-prefix-ambiguous", ["resume", "{shared}"], "AMBIGUOUS_TASK_ID"),
    ("resume-prefix-not-hex", ["resume", "xyz"], "TASK_NOT_FOUND"),
    ("effects-task-prefix-ambiguous", ["effects", "--task", "{shared}"], "AMBIGUOUS_TASK_ID"),
    ("effects-task-prefix-too-long", ["effects", "--task", "f" * 100_000], "TASK_NOT_FOUND"),
    ("tasks-parent-prefix-ambiguous", ["tasks", "--parent", "{shared}"], "AMBIGUOUS_TASK_ID"),
    ("tasks-parent-prefix-not-hex", ["tasks", "--parent", "parent"], "TASK_NOT_FOUND"),
    ("tasks-root-prefix-empty", ["tasks", "--root", ""], "TASK_NOT_FOUND"),
    ("tasks-root-prefix-not-utf8", ["tasks", "--root", NOT_UTF8], "INVALID_ENCODING"),
    ("show-extra", ["show", "{task}", "{task}"], "INVALID_ARGUMENT"),
    ("show-full-and-json", ["show", "{task}", "--full", "--json"], "INVALID_ARGUMENT"),
    ("show-json-with-value", ["show", "{task}", "--json=yes"], "INVALID_ARGUMENT"),
    ("show-full-unknown-task", ["show", str(uuid.UUID(int=1)), "--full"], "TASK_NOT_FOUND"),
    ("show-json-ambiguous", ["show", "{shared}", "--json"], "AMBIGUOUS_TASK_ID"),
    # effects
    ("effects-task-malformed", ["effects", "--task", "nope"], "TASK_NOT_FOUND"),
    ("effects-limit-negative", ["effects", "--limit", "-1"], "ARGUMENT_OUT_OF_RANGE"),
    ("effects-limit-huge", ["effects", "--limit", "2147483648"], "ARGUMENT_OUT_OF_RANGE"),
    ("effects-state-unknown", ["effects", "--state", "maybe"], "INVALID_ARGUMENT"),
    # resolve-effect
    ("resolve-id-wrong-type", ["resolve-effect", "seven", "--as", "failed"], "INVALID_ARGUMENT"),
    ("resolve-id-digits", ["resolve-effect", DIGITS, "--as", "failed"], "INVALID_ARGUMENT"),
    ("resolve-id-negative", ["resolve-effect", "-1", "--as", "failed"], "EFFECT_NOT_FOUND"),
    ("resolve-id-zero", ["resolve-effect", "0", "--as", "failed"], "EFFECT_NOT_FOUND"),
    ("resolve-id-past-bigint", ["resolve-effect", str(2**63), "--as", "failed"], "EFFECT_NOT_FOUND"),
    ("resolve-as-unknown", ["resolve-effect", "{effect}", "--as", "maybe"], "INVALID_ARGUMENT"),
    ("resolve-not-unknown", ["resolve-effect", "{settled}", "--as", "committed"], "INVALID_TRANSITION"),
    ("resolve-as-missing", ["resolve-effect", "{effect}"], "INVALID_ARGUMENT"),
    (
        "resolve-receipt-deep",
        ["resolve-effect", "{effect}", "--as", "committed", "--receipt", DEEP_980],
        "INPUT_TOO_DEEP",
    ),
    (
        "resolve-receipt-nul",
        ["resolve-effect", "{effect}", "--as", "committed", "--receipt", '{"r": "\\u0000"}'],
        "INVALID_STRING",
    ),
    (
        "resolve-receipt-digits",
        ["resolve-effect", "{effect}", "--as", "committed", "--receipt", DIGITS],
        "NUMBER_OUT_OF_RANGE",
    ),
    (
        "resolve-receipt-malformed",
        ["resolve-effect", "{effect}", "--as", "committed", "--receipt", "{"],
        "INVALID_INPUT",
    ),
    (
        "resolve-receipt-latin1",
        ["resolve-effect", "{effect}", "--as", "committed", "--receipt", "@{tmp}/latin1.json"],
        "INVALID_ENCODING",
    ),
    (
        "resolve-note-over-long",
        ["resolve-effect", "{effect}", "--as", "failed", "--note", "n" * 2001],
        "INVALID_STRING",
    ),
    ("resolve-note-nul", ["resolve-effect", "{effect}", "--as", "failed", "--note", "\x00"], "INVALID_STRING"),
    # resume and cancel
    ("resume-malformed", ["resume", "nope"], "TASK_NOT_FOUND"),
    ("resume-note-over-long", ["resume", "{blocked}", "--note", "n" * 2001], "INVALID_STRING"),
    ("resume-note-not-utf8", ["resume", "{blocked}", "--note", NOT_UTF8], "INVALID_ENCODING"),
    ("cancel-malformed", ["cancel", "nope", "--reason", "x"], "TASK_NOT_FOUND"),
    ("cancel-already-cancelled", ["cancel", "{cancelled}", "--reason", "x"], "INVALID_TRANSITION"),
    ("cancel-completed", ["cancel", "{completed}", "--reason", "x"], "INVALID_TRANSITION"),
    ("cancel-reason-missing", ["cancel", "{task}"], "INVALID_ARGUMENT"),
    ("cancel-reason-empty", ["cancel", "{task}", "--reason", ""], "INVALID_ARGUMENT"),
    ("cancel-reason-nul", ["cancel", "{task}", "--reason", "oops\x00"], "INVALID_STRING"),
    ("cancel-reason-surrogate", ["cancel", "{task}", "--reason", "\ud800"], "INVALID_ENCODING"),
    ("cancel-reason-over-long", ["cancel", "{task}", "--reason", "r" * 100_000], "INVALID_STRING"),
    # stop (cancel's new name), stop-summary, rerun, the kill switch
    ("stop-reason-missing", ["stop", "{task}"], "INVALID_ARGUMENT"),
    ("stop-reason-empty", ["stop", "{task}", "--reason", ""], "INVALID_ARGUMENT"),
    ("stop-reason-blank", ["stop", "{task}", "--reason", "  \t "], "INVALID_ARGUMENT"),
    ("stop-reason-nul", ["stop", "{task}", "--reason", "why\x00"], "INVALID_STRING"),
    ("stop-reason-not-utf8", ["stop", "{task}", "--reason", NOT_UTF8], "INVALID_ENCODING"),
    ("stop-reason-over-long", ["stop", "{task}", "--reason", "r" * 100_000], "INVALID_STRING"),
    ("stop-malformed", ["stop", "nope", "--reason", "x"], "TASK_NOT_FOUND"),
    ("stop-over-long", ["stop", "f" * 100_000, "--reason", "x"], "TASK_NOT_FOUND"),
    ("stop-unknown", ["stop", str(uuid.UUID(int=1)), "--reason", "x"], "TASK_NOT_FOUND"),
    ("stop-prefix-ambiguous", ["stop", "{shared}", "--reason", "x"], "AMBIGUOUS_TASK_ID"),
    ("stop-completed", ["stop", "{completed}", "--reason", "x"], "INVALID_TRANSITION"),
    ("stop-already-cancelled", ["stop", "{cancelled}", "--reason", "x"], "INVALID_TRANSITION"),
    ("stop-extra", ["stop", "{task}", "{task}", "--reason", "x"], "INVALID_ARGUMENT"),
    ("stop-summary-never-stopped", ["stop-summary", "{completed}"], "STOP_NOT_FOUND"),
    ("stop-summary-malformed", ["stop-summary", "nope"], "TASK_NOT_FOUND"),
    ("stop-summary-nul", ["stop-summary", "\x00"], "TASK_NOT_FOUND"),
    ("stop-summary-not-utf8", ["stop-summary", NOT_UTF8], "INVALID_ENCODING"),
    ("stop-summary-missing", ["stop-summary"], "INVALID_ARGUMENT"),
    ("stop-summary-json-with-value", ["stop-summary", "{cancelled}", "--json=yes"], "INVALID_ARGUMENT"),
    ("rerun-not-cancelled", ["rerun", "{task}", "--reason", "x"], "INVALID_TRANSITION"),
    ("rerun-reason-missing", ["rerun", "{cancelled}"], "INVALID_ARGUMENT"),
    ("rerun-reason-empty", ["rerun", "{cancelled}", "--reason", ""], "INVALID_ARGUMENT"),
    ("rerun-reason-nul", ["rerun", "{cancelled}", "--reason", "\x00"], "INVALID_STRING"),
    ("rerun-malformed", ["rerun", "nope", "--reason", "x"], "TASK_NOT_FOUND"),
    ("agent-stop-tenant-missing", ["agent-stop", "t.steps", "--reason", "x"], "INVALID_ARGUMENT"),
    ("agent-stop-reason-missing", ["agent-stop", "t.steps", "--tenant", "acme"], "INVALID_ARGUMENT"),
    ("agent-stop-reason-blank", ["agent-stop", "t.steps", "--tenant", "acme", "--reason", " "], "INVALID_ARGUMENT"),
    (
        "agent-stop-agent-over-long",
        ["agent-stop", "a" * 201, "--tenant", "acme", "--reason", "x"],
        "INVALID_IDENTIFIER",
    ),
    ("agent-stop-agent-nul", ["agent-stop", "t.\x00", "--tenant", "acme", "--reason", "x"], "INVALID_IDENTIFIER"),
    (
        "agent-stop-tenant-over-long",
        ["agent-stop", "t.steps", "--tenant", "t" * 101, "--reason", "x"],
        "INVALID_IDENTIFIER",
    ),
    (
        "agent-stop-tenant-not-utf8",
        ["agent-stop", "t.steps", "--tenant", NOT_UTF8, "--reason", "x"],
        "INVALID_ENCODING",
    ),
    ("agent-reopen-tenant-missing", ["agent-reopen", "t.steps"], "INVALID_ARGUMENT"),
    ("agent-reopen-reason-nul", ["agent-reopen", "t.steps", "--tenant", "acme", "--reason", "\x00"], "INVALID_STRING"),
    ("agent-reopen-agent-control", ["agent-reopen", "t.\x1b[2J", "--tenant", "acme"], "INVALID_IDENTIFIER"),
    # audit
    ("audit-action-unknown", ["audit", "rewrite"], "INVALID_ARGUMENT"),
    ("audit-action-missing", ["audit"], "INVALID_ARGUMENT"),
    # supervise (--once, so that a check that let a bad value through ends instead of looping)
    ("supervise-interval-negative", ["supervise", "--once", "--interval", "-1"], "ARGUMENT_OUT_OF_RANGE"),
    ("supervise-interval-zero", ["supervise", "--once", "--interval", "0"], "ARGUMENT_OUT_OF_RANGE"),
    ("supervise-interval-nan", ["supervise", "--once", "--interval", "nan"], "ARGUMENT_OUT_OF_RANGE"),
    ("supervise-interval-inf", ["supervise", "--once", "--interval", "inf"], "ARGUMENT_OUT_OF_RANGE"),
    ("supervise-interval-huge", ["supervise", "--once", "--interval", "1e12"], "ARGUMENT_OUT_OF_RANGE"),
    ("supervise-interval-wrong-type", ["supervise", "--once", "--interval", "often"], "INVALID_ARGUMENT"),
    # pools and agents take nothing
    ("pools-extra", ["pools", "batch"], "INVALID_ARGUMENT"),
    ("agents-extra", ["agents", "--all"], "INVALID_ARGUMENT"),
    # grants (tests/runtime/authz/test_grants_cli.py has the rest)
    ("grants-no-tenant", ["grants", "list"], "INVALID_ARGUMENT"),
    ("grants-state-unknown", ["grants", "list", "--tenant", "acme", "--state", "gone"], "INVALID_ARGUMENT"),
    (
        "grants-resource-pattern",
        ["grants", "list", "--tenant", "acme", "--resource", "a*b"],
        "INVALID_RESOURCE_PATTERN",
    ),
    ("grants-principal-robot", ["grants", "list", "--tenant", "acme", "--principal", "robot:x"], "INVALID_IDENTIFIER"),
    (
        "grants-actor-not-a-person",
        ["grants", "revoke", "1", "--tenant", "acme", "--reason", "x"],
        "GRANT_REQUIRES_PERSON",
    ),
    ("grants-id-not-a-number", ["grants", "revoke", "one", "--tenant", "acme"], "INVALID_ARGUMENT"),
    # pool
    ("pool-unknown", ["pool", "nosuch", "--max-running", "3"], "UNKNOWN_POOL"),
    ("pool-bad-name", ["pool", "bad pool!", "--max-running", "3"], "INVALID_IDENTIFIER"),
    ("pool-not-a-slug", ["pool", "pööl", "--max-running", "3"], "INVALID_IDENTIFIER"),
    ("pool-over-long", ["pool", "p" * 101, "--max-running", "3"], "INVALID_IDENTIFIER"),
    ("pool-running-2-31", ["pool", "batch", "--max-running", "2147483648"], "ARGUMENT_OUT_OF_RANGE"),
    ("pool-running-past-max", ["pool", "batch", "--max-running", "10001"], "ARGUMENT_OUT_OF_RANGE"),
    ("pool-running-zero", ["pool", "batch", "--max-running", "0"], "ARGUMENT_OUT_OF_RANGE"),
    ("pool-queued-2-31", ["pool", "batch", "--max-queued", "2147483648"], "ARGUMENT_OUT_OF_RANGE"),
    ("pool-queued-negative", ["pool", "batch", "--max-queued", "-1"], "ARGUMENT_OUT_OF_RANGE"),
    ("pool-running-digits", ["pool", "batch", "--max-running", DIGITS], "INVALID_ARGUMENT"),
    ("pool-running-wrong-type", ["pool", "batch", "--max-running", "2.5"], "INVALID_ARGUMENT"),
    ("pool-unknown-2-31", ["pool", "nosuch", "--max-queued", "2147483648"], "ARGUMENT_OUT_OF_RANGE"),
    # pool-create
    ("pool-create-exists", ["pool-create", "batch", "--max-running", "1", "--max-queued", "1"], "POOL_EXISTS"),
    (
        "pool-create-bad-name",
        ["pool-create", "bad pool!", "--max-running", "1", "--max-queued", "1"],
        "INVALID_IDENTIFIER",
    ),
    (
        "pool-create-over-long",
        ["pool-create", "p" * 101, "--max-running", "1", "--max-queued", "1"],
        "INVALID_IDENTIFIER",
    ),
    (
        "pool-create-running-2-31",
        ["pool-create", "big", "--max-running", "2147483648", "--max-queued", "1"],
        "ARGUMENT_OUT_OF_RANGE",
    ),
    (
        "pool-create-queued-2-31",
        ["pool-create", "big", "--max-running", "1", "--max-queued", "2147483648"],
        "ARGUMENT_OUT_OF_RANGE",
    ),
    ("pool-create-missing-limit", ["pool-create", "big", "--max-running", "1"], "INVALID_ARGUMENT"),
    (
        "pool-create-note-over-long",
        ["pool-create", "big", "--max-running", "1", "--max-queued", "1", "--note", "n" * 2001],
        "INVALID_STRING",
    ),
    # pool-remove
    ("pool-remove-unknown", ["pool-remove", "nosuch"], "UNKNOWN_POOL"),
    ("pool-remove-in-use", ["pool-remove", "batch"], "POOL_IN_USE"),
    ("pool-remove-bad-name", ["pool-remove", "bad pool!"], "INVALID_IDENTIFIER"),
    # the command line itself
    ("no-command", [], "INVALID_ARGUMENT"),
    ("unknown-command", ["explode"], "INVALID_ARGUMENT"),
    ("verbosity-out-of-choices", ["--verbosity", "9", "tasks"], "INVALID_ARGUMENT"),
]


def filled(argv: list[str], world: dict) -> list[str]:
    for name, value in world.items():
        argv = [arg.replace("{" + name + "}", value) for arg in argv]
    return argv


def test_every_command_has_rows_of_its_own():
    assert {argv[0] for _, argv, _ in ROWS if argv and argv[0] in COMMANDS} == set(COMMANDS)


@pytest.mark.parametrize(("argv", "code"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS])
def test_a_hostile_argument_exits_2_with_its_code_and_changes_nothing(world, argv, code):
    argv = filled(argv, world)
    before = snapshot()

    ran = manage(*argv)

    assert ran.code == 2, (ran.out, ran.err[-2000:])
    assert f"{code}: " in ran.err, ran.err[-2000:]
    assert "Traceback" not in ran.err + ran.out
    assert ran.out == ""
    assert snapshot() == before


def test_each_command_that_is_refused_above_works_with_good_arguments(world):
    """The rows above fail for their bad argument, not because the command is broken."""
    for command, argv in COMMANDS.items():
        if command == "supervise":
            continue  # a sweep writes as it should; covered elsewhere
        ran = manage("--actor", "user:alice", *filled(argv, world))
        assert ran.code == 0, (command, ran.err[-2000:])


# --- a real process ------------------------------------------------------------------------


def run_manage(child_env, *args, stdout=subprocess.PIPE, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "steward", *args],
        cwd=REPO,
        env=child_env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["submit", "t.steps", "--input", DEEP_980], "INPUT_TOO_DEEP"),
        (["submit", b"caf\xe9"], "INVALID_ENCODING"),
        (["tasks", "--limit", "-1"], "ARGUMENT_OUT_OF_RANGE"),
        (["tasks", "--limit", "lots"], "INVALID_ARGUMENT"),
        # No --once: a real supervisor that let -1 through would sleep(-1) and die, or loop.
        (["supervise", "--interval", "-1"], "ARGUMENT_OUT_OF_RANGE"),
        (["pool", "nosuch", "--max-queued", "2147483648"], "ARGUMENT_OUT_OF_RANGE"),
        (["pool", "nosuch", "--max-running", "3"], "UNKNOWN_POOL"),
        (
            ["--actor", "u" * 201, "pool-create", "fresh", "--max-running", "1", "--max-queued", "1"],
            "INVALID_IDENTIFIER",
        ),
    ],
    ids=[
        "deep-input",
        "argv-not-utf8",
        "limit-negative",
        "limit-wrong-type",
        "interval-negative",
        "max-queued-2-31",
        "unknown-pool",
        "actor-over-long",
    ],
)
def test_the_real_command_refuses_hostile_arguments_with_exit_2(live, child_env, args, code):
    before = snapshot()

    ran = run_manage(child_env, *args, timeout=30)

    err = ran.stderr.decode(errors="replace")
    assert ran.returncode == 2, err
    assert f"{code}: " in err
    assert "Traceback" not in err
    assert ran.stdout == b""
    assert snapshot() == before


def test_show_into_a_closed_pipe_exits_quietly(live, child_env):
    """`steward show ID | head`: the reader is gone before we write. The read end is
    closed before the command starts, so the first write certainly fails."""
    task_id = task_submit(agent="t.steps", input={"n": 1}, **ALICE).task_id
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        ran = run_manage(child_env, "--actor", "user:alice", "show", str(task_id), stdout=write_end)
    finally:
        os.close(write_end)
    assert ran.stderr == b""  # no traceback, no "Exception ignored ... BrokenPipeError"
    assert ran.returncode == 1  # what Python's docs recommend for EPIPE
    assert Task.objects.filter(id=task_id).exists()


def test_show_piped_to_head_in_a_shell_exits_quietly(live, child_env):
    """The same through a real shell pipe. `head -n 0` exits without reading, long before
    Python has started, so the pipe is closed when `show` writes."""
    task_id = task_submit(agent="t.steps", input={"n": 1}, **ALICE).task_id
    script = f'"{sys.executable}" manage.py steward show {task_id} | head -n 0; exit "${{PIPESTATUS[0]}}"'
    ran = subprocess.run(["bash", "-c", script], cwd=REPO, env=child_env, capture_output=True, timeout=60)
    assert ran.stderr == b""
    assert ran.returncode == 1
