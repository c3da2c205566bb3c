"""A task named by a unique prefix of its id (runtime/tasks/selectors.py task_id_from_prefix),
as every CLI command that takes a task accepts it: one range of the primary key, refused
when it begins several ids (AMBIGUOUS_TASK_ID) or none (TASK_NOT_FOUND). And a task named
by its caller key (task_for_key)."""

from __future__ import annotations

import contextlib
import os
import uuid

import pytest
from django.db import connection

from runtime.errors import AmbiguousTaskId, TaskNotFound
from runtime.models import Task
from runtime.tasks.selectors import AMBIGUOUS_SHOWN, task_for_key, task_id_from_prefix
from runtime.tasks.services import task_submit
from tests.plans import explain, rows_read
from tests.runtime.test_cli import ALICE, refused, steward
from tests.runtime.test_pages import executed, load_tasks
from tests.snapshot import snapshot


def submitted(n: int) -> list[uuid.UUID]:
    return [task_submit(agent="t.steps", input={"i": i}, **ALICE).task_id for i in range(n)]


def shared_start(ids) -> str:
    """The longest start every id's canonical form shares (tasks created close together
    share their timestamp digits)."""
    return os.path.commonprefix([str(i) for i in ids])


def test_a_whole_id_or_any_prefix_that_begins_one_id_names_that_task(db):
    first, second = submitted(2)
    start = shared_start([first, second])
    unique = str(second)[: len(start) + 1]  # one digit past the shared start tells them apart

    for given in (str(second), str(second).upper(), second.hex, unique, unique.replace("-", ""), second):
        assert task_id_from_prefix(given) == second, given


def test_a_prefix_that_begins_several_ids_is_ambiguous_and_names_them(db):
    ids = submitted(2)
    start = shared_start(ids)
    assert len(start) >= 8  # the first 8 digits are the same 71 minutes of milliseconds

    with pytest.raises(AmbiguousTaskId) as error:
        task_id_from_prefix(start)

    assert error.value.code == "AMBIGUOUS_TASK_ID"
    assert error.value.details["matches"] == [str(i) for i in sorted(ids)]
    for task_id in ids:
        assert f"{task_id} (t.steps, queued)" in error.value.message
    assert error.value.message.endswith("; give more of the id")


def test_an_ambiguous_prefix_lists_only_the_first_few_matches(db):
    ids = submitted(AMBIGUOUS_SHOWN + 2)

    with pytest.raises(AmbiguousTaskId) as error:
        task_id_from_prefix(shared_start(ids))

    assert f"begins more than {AMBIGUOUS_SHOWN} task ids" in error.value.message
    assert error.value.details["matches"] == [str(i) for i in sorted(ids)[:AMBIGUOUS_SHOWN]]


@pytest.mark.parametrize(
    "given",
    [
        "",
        "-",
        "not-a-task",
        "01a2g",
        "0x01a2",
        "01a230af--d9",
        "01a2-30af",
        "01a230af d9",
        " 01a2",
        "f" * 33,
        "f" * 37,
        "01a230af-d943-7308-805b-0d1a68068df80",
        "\x00",
        "{01a230af}",
        None,
        12,
    ],
    ids=[
        "empty",
        "hyphen",
        "words",
        "not-hex",
        "0x",
        "double-hyphen",
        "hyphen-misplaced",
        "space",
        "leading-space",
        "33-digits",
        "37-characters",
        "canonical-plus-one",
        "nul",
        "braces",
        "none",
        "int",
    ],
)
def test_what_is_not_an_id_or_its_start_names_no_task(db, given):
    submitted(1)
    with pytest.raises(TaskNotFound):
        task_id_from_prefix(given)


def test_a_prefix_that_begins_no_id_names_no_task(db):
    (task_id,) = submitted(1)
    other = "0" if str(task_id)[0] != "0" else "f"

    with pytest.raises(TaskNotFound) as error:
        task_id_from_prefix(other + "123")
    assert error.value.message == f"no task id starts with {other}123"
    with pytest.raises(TaskNotFound):
        task_id_from_prefix(uuid.UUID(int=1))


def test_resolving_a_prefix_reads_a_few_index_entries_however_many_tasks_there_are(db):
    load_tasks(5_000)
    with connection.cursor() as cur:
        cur.execute("ANALYZE steward_task")
    some = Task.objects.order_by("id")[2_500].id

    for given in (str(some)[:4], str(some)[:13], str(some)):  # thousands of matches, a few, one
        statements = executed(lambda: _quietly(given))
        (plan,) = [explain(sql) for sql in statements]
        assert rows_read(plan, "steward_task") <= AMBIGUOUS_SHOWN + 1, (given, plan)


def _quietly(given):
    with contextlib.suppress(AmbiguousTaskId):
        task_id_from_prefix(given)


# --- through the CLI: every command that takes a task -----------------------------------------


def test_every_command_that_takes_a_task_accepts_a_unique_prefix(db):
    parent = task_submit(agent="t.steps", input={}, **ALICE).task_id
    prefix = str(parent)[:-6]  # 30 characters: unique among the few tasks here

    assert f"task  {parent}" in steward("show", prefix)
    assert steward("effects", "--task", prefix).splitlines()[-1] == "(none)"
    assert steward("tasks", "--parent", prefix).splitlines()[-1] == "(none)"
    assert steward("tasks", "--root", prefix).splitlines()[-1] == "(none)"
    said = steward("stop", prefix, "--reason", "done with it").splitlines()
    assert said[0].endswith(": 1 task(s), 1 cancelled, 0 stopping") and said[1:] == [f"  {parent}  cancelled"]
    assert steward("resume", prefix) == f"{parent} queued for a new attempt (reason: resume)\n"


@pytest.mark.parametrize(
    "command",
    [
        ["show"],
        ["stop", "--reason", "r"],
        ["cancel", "--reason", "r"],
        ["resume"],
        ["effects", "--task"],
        ["tasks", "--parent"],
        ["tasks", "--root"],
    ],
    ids="-".join,
)
def test_every_command_that_takes_a_task_refuses_an_ambiguous_prefix_and_writes_nothing(db, command):
    ids = submitted(2)
    before = snapshot()

    message = refused(*command, shared_start(ids))

    assert message.startswith(f"AMBIGUOUS_TASK_ID: {shared_start(ids)} begins 2 task ids: ")
    assert snapshot() == before


# --- by caller key (the demo watcher finds the seeded tasks so) ----------------------------------


def test_a_caller_key_names_the_task_it_made_in_its_own_tenant_only(db):
    task_id = task_submit(agent="t.steps", input={}, idempotency_key="k-1", **ALICE).task_id
    before = snapshot()

    assert task_for_key(tenant="acme", key="k-1").id == task_id
    for tenant, key in (("globex", "k-1"), ("acme", "k-2")):
        with pytest.raises(TaskNotFound):
            task_for_key(tenant=tenant, key=key)
    assert snapshot() == before  # it only reads, unlike a second submit with the key
