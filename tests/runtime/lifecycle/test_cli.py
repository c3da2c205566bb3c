"""`steward retention show|set|run` and `steward erase` (runtime/management/lifecycle.py):
the same services as the API; refusals exit with their stable code."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runtime.memory.services import memory_put
from runtime.models import ErasureReceipt, RetentionPolicy, Task
from runtime.testing import StewardTestEnv
from tests.runtime.lifecycle.test_erasure import FORGET, tables_holding
from tests.runtime.memory import kinds  # noqa: F401  (declares test_note)

pytestmark = pytest.mark.django_db(transaction=True)


def steward(*args: str) -> str:
    out = io.StringIO()
    call_command("steward", "--actor", "user:alice", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_retention_is_set_and_shown_from_the_terminal():
    steward(
        "retention",
        "set",
        "--tenant",
        "acme",
        "--task-days",
        "30",
        "--gateway-days",
        "30",
        "--memory-days",
        "30",
        "--decision-days",
        "30",
        "--audit-days",
        "400",
        "--reason",
        "policy",
    )
    shown = steward("retention", "show", "--tenant", "acme")
    assert "version 1" in shown and "400" in shown
    assert RetentionPolicy.objects.get(tenant="acme").task_days == 30


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--task-days", "thirty"], "ARGUMENT_OUT_OF_RANGE"),
        (["--task-days", "9" * 40], "ARGUMENT_OUT_OF_RANGE"),
        (["--task-days", "٣"], "ARGUMENT_OUT_OF_RANGE"),
        (["--task-days", "50", "--audit-days", "10"], "INVALID_ARGUMENT"),
    ],
)
def test_hostile_retention_arguments_exit_with_a_stable_code(args, code):
    with pytest.raises(CommandError, match=code):
        steward("retention", "set", "--tenant", "acme", *args)
    assert not RetentionPolicy.objects.exists()


def test_erase_previews_then_erases_and_prints_the_receipt():
    with StewardTestEnv(tenant="acme", owner="user:alice") as env:
        task = env.submit("lifecycle.keeper", {"secret": FORGET})
        env.run_until_idle()
    preview = steward("erase", "--task", str(task), "--tenant", "acme", "--preview")
    assert "would erase" in preview and "journal" in preview and Task.objects.get(id=task).erased_at is None
    with pytest.raises(CommandError, match="INVALID_ARGUMENT"):  # an erasure says why
        steward("erase", "--task", str(task), "--tenant", "acme")
    done = steward("erase", "--task", str(task), "--tenant", "acme", "--reason", "asked")
    receipt = ErasureReceipt.objects.get()
    assert str(receipt.id) in done and FORGET not in done
    assert tables_holding(FORGET) == set()
    with pytest.raises(CommandError, match="TASK_NOT_FOUND"):  # another tenant's task is not found
        steward("erase", "--task", str(task), "--tenant", "globex", "--preview")


def test_erase_an_agents_memory_from_the_terminal():
    memory_put(tenant="acme", agent="memory.reader", kind="test_note", key="k", value={"text": FORGET}, actor="u:a")
    preview = steward("erase", "--agent", "memory.reader", "--tenant", "acme", "--preview")
    assert "would erase 1 rows" in preview and "memory" in preview
    done = steward("erase", "--agent", "memory.reader", "--tenant", "acme", "--reason", "forget me")
    assert str(ErasureReceipt.objects.get(subject_kind="agent").id) in done and FORGET not in done
    assert tables_holding(FORGET) == set()
    for hostile, code in (("", "INVALID_IDENTIFIER"), ("a" * 5000, "INVALID_IDENTIFIER"), ("x\x00y", "INVALID")):
        with pytest.raises(CommandError, match=code):
            steward("erase", "--agent", hostile, "--tenant", "acme", "--preview")
