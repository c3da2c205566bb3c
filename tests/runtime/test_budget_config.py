"""Budgets and quotas are set by people only, through the services the CLI and the API
call: hostile values are refused with stable codes and write nothing; every change is an
audit row and, given a version, a conditional write; agent code cannot write them, not
even through the ORM on its own connection."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from runtime import db as sql
from runtime.errors import StewardError
from runtime.limits.services import budget_set, quota_remove, quota_set
from runtime.models import AuditEvent, Budget, Quota, TokenUsage
from tests.runtime.test_cli_arguments import manage
from tests.snapshot import snapshot

ADMIN = "user:dave"

# (a budget limit given, the code it is refused with)
BAD_TOKENS = [
    (-1, "ARGUMENT_OUT_OF_RANGE"),
    (10**15 + 1, "ARGUMENT_OUT_OF_RANGE"),
    (2**63, "ARGUMENT_OUT_OF_RANGE"),
    (10**400, "ARGUMENT_OUT_OF_RANGE"),
    (1.5, "ARGUMENT_OUT_OF_RANGE"),
    (float("nan"), "ARGUMENT_OUT_OF_RANGE"),
    (float("inf"), "ARGUMENT_OUT_OF_RANGE"),
    ("100", "ARGUMENT_OUT_OF_RANGE"),
    (True, "ARGUMENT_OUT_OF_RANGE"),
    ([1], "ARGUMENT_OUT_OF_RANGE"),
    ({"n": 1}, "ARGUMENT_OUT_OF_RANGE"),
]


def refused(fn, **kwargs) -> str:
    with pytest.raises(StewardError) as caught:
        fn(**kwargs)
    return caught.value.code


@pytest.mark.parametrize(("value", "code"), BAD_TOKENS, ids=[repr(v)[:20] for v, _ in BAD_TOKENS])
@pytest.mark.parametrize("field", ["task_tokens", "tree_tokens", "tenant_tokens"])
def test_a_hostile_budget_is_refused_with_its_code_and_writes_nothing(db, field, value, code):
    before = snapshot()
    assert refused(budget_set, tenant="acme", actor=ADMIN, **{field: value}) == code
    assert snapshot() == before


# (the arguments of quota_set changed from a good call, the code)
BAD_QUOTAS = [
    ({"calls": -1}, "ARGUMENT_OUT_OF_RANGE"),
    ({"calls": 1_000_001}, "ARGUMENT_OUT_OF_RANGE"),
    ({"calls": "5"}, "ARGUMENT_OUT_OF_RANGE"),
    ({"calls": 2.0}, "ARGUMENT_OUT_OF_RANGE"),
    ({"window_seconds": 0}, "ARGUMENT_OUT_OF_RANGE"),
    ({"window_seconds": 86_401}, "ARGUMENT_OUT_OF_RANGE"),
    ({"window_seconds": None}, "ARGUMENT_OUT_OF_RANGE"),
    ({"service": "Echo"}, "INVALID_IDENTIFIER"),
    ({"service": "../echo"}, "INVALID_IDENTIFIER"),
    ({"service": "e" * 64}, "INVALID_IDENTIFIER"),
    ({"service": 7}, "INVALID_IDENTIFIER"),
    ({"tenant": ""}, "INVALID_IDENTIFIER"),
    ({"tenant": "a\nb"}, "INVALID_IDENTIFIER"),
    ({"version": -1}, "ARGUMENT_OUT_OF_RANGE"),
    ({"version": 2**31}, "ARGUMENT_OUT_OF_RANGE"),
    ({"reason": "x" * 2001}, "INVALID_STRING"),
    ({"reason": "a\u0000b"}, "INVALID_STRING"),
]


@pytest.mark.parametrize(("changes", "code"), BAD_QUOTAS, ids=[str(c)[:30] for c, _ in BAD_QUOTAS])
def test_a_hostile_quota_is_refused_with_its_code_and_writes_nothing(db, changes, code):
    before = snapshot()
    good = {"tenant": "acme", "service": "echo", "calls": 5, "window_seconds": 60, "actor": ADMIN}
    assert refused(quota_set, **{**good, **changes}) == code
    assert snapshot() == before


@pytest.mark.parametrize("actor", ["agent:t.steps", "task:0193", "cli:root", "user:", "worker:1"])
def test_only_a_person_changes_budgets_and_quotas(db, actor):
    before = snapshot()
    assert refused(budget_set, tenant="acme", actor=actor, task_tokens=5) == "BUDGET_REQUIRES_PERSON"
    assert (
        refused(quota_set, tenant="acme", service="echo", calls=1, window_seconds=1, actor=actor)
        == "BUDGET_REQUIRES_PERSON"
    )
    assert refused(quota_remove, tenant="acme", service="echo", actor=actor) == "BUDGET_REQUIRES_PERSON"
    assert snapshot() == before


def test_each_change_is_audited_and_a_stale_version_is_a_conflict_that_writes_nothing(db):
    first = budget_set(tenant="acme", actor=ADMIN, task_tokens=100, reason="start")
    assert first.version == 1
    second = budget_set(tenant="acme", actor="user:alice", tree_tokens=500, version=1)
    assert (second.version, second.task_tokens, second.tree_tokens, second.tenant_tokens) == (2, 100, 500, None)
    before = snapshot()
    assert refused(budget_set, tenant="acme", actor=ADMIN, task_tokens=1, version=1) == "VERSION_CONFLICT"
    assert refused(budget_set, tenant="globex", actor=ADMIN, task_tokens=1, version=4) == "VERSION_CONFLICT"
    assert snapshot() == before
    events = list(AuditEvent.objects.filter(tenant="acme", kind="budget.set").order_by("id"))
    assert [(e.actor, e.data["version"], e.data["after"]["task_tokens"]) for e in events] == [
        (ADMIN, 1, 100),
        ("user:alice", 2, 100),
    ]
    assert events[1].data["before"] == {"task_tokens": 100, "tree_tokens": None, "tenant_tokens": None}

    q = quota_set(tenant="acme", service="echo", calls=5, window_seconds=60, actor=ADMIN)
    assert (
        refused(
            quota_set, tenant="acme", service="echo", calls=6, window_seconds=60, actor=ADMIN, version=q.version + 1
        )
        == "VERSION_CONFLICT"
    )
    assert refused(quota_remove, tenant="acme", service="echo", actor=ADMIN, version=9) == "VERSION_CONFLICT"
    quota_remove(tenant="acme", service="echo", actor=ADMIN, version=q.version, reason="done")
    assert not Quota.objects.exists()
    assert refused(quota_remove, tenant="acme", service="echo", actor=ADMIN) == "QUOTA_NOT_FOUND"
    assert [e.kind for e in AuditEvent.objects.filter(kind__startswith="quota.").order_by("id")] == [
        "quota.set",
        "quota.removed",
    ]


@pytest.mark.parametrize(
    "write",
    [
        lambda: Budget.objects.create(tenant="acme", task_tokens=10**15, updated_by="user:dave"),
        lambda: Quota.objects.create(tenant="acme", service="echo", calls=10**6, window_seconds=1, updated_by="x"),
        lambda: TokenUsage.objects.filter(scope="tenant").delete(),
        lambda: TokenUsage.objects.create(tenant="acme", scope="tenant", subject="acme", shard=0, tokens=-(10**9)),
    ],
    ids=["budget", "quota", "usage-reset", "usage-forged"],
)
def test_while_agent_code_runs_its_connection_cannot_write_budgets_quotas_or_usage(db, write):
    TokenUsage.objects.create(tenant="acme", scope="tenant", subject="acme", shard=1, tokens=5)
    sql.execute("agent_code", {"task": "0193-some-task"})
    try:
        with pytest.raises(Exception) as caught, transaction.atomic():
            write()
        assert "refused at storage" in str(caught.value)
    finally:
        sql.execute("agent_code", {"task": ""})
    assert not Budget.objects.exists() and not Quota.objects.exists()
    assert list(TokenUsage.objects.values_list("tokens", flat=True)) == [5]
    assert connection.is_usable()


# (argv after `steward`, the code on stderr)
CLI = [
    (["--actor", ADMIN, "budget-set", "--tenant", "acme", "--task-tokens", "-5"], "ARGUMENT_OUT_OF_RANGE"),
    (["--actor", ADMIN, "budget-set", "--tenant", "acme", "--tree-tokens", "1e9"], "ARGUMENT_OUT_OF_RANGE"),
    (["--actor", ADMIN, "budget-set", "--tenant", "acme", "--tenant-tokens", "9" * 5000], "ARGUMENT_OUT_OF_RANGE"),
    (["--actor", ADMIN, "budget-set", "--tenant", "acme", "--task-tokens", "\u0661\u0662"], "ARGUMENT_OUT_OF_RANGE"),
    (["--actor", ADMIN, "budget-set", "--tenant", "acme", "--task-tokens", "5", "--version", "x"], "INVALID_ARGUMENT"),
    (["--actor", "agent:t.steps", "budget-set", "--tenant", "acme", "--task-tokens", "5"], "BUDGET_REQUIRES_PERSON"),
    (
        ["--actor", ADMIN, "quota-set", "echo", "--tenant", "acme", "--calls", "1.5", "--window", "3"],
        "INVALID_ARGUMENT",
    ),
    (
        ["--actor", ADMIN, "quota-set", "echo", "--tenant", "acme", "--calls", "5", "--window", "0"],
        "ARGUMENT_OUT_OF_RANGE",
    ),
    (
        ["--actor", ADMIN, "quota-set", "BAD NAME", "--tenant", "acme", "--calls", "5", "--window", "3"],
        "INVALID_IDENTIFIER",
    ),
    (["--actor", ADMIN, "quota-remove", "echo", "--tenant", "acme"], "QUOTA_NOT_FOUND"),
]


@pytest.mark.parametrize(("argv", "code"), CLI, ids=[" ".join(a[2:5])[:40] for a, _ in CLI])
def test_the_cli_refuses_hostile_budgets_and_quotas_with_their_code(db, argv, code):
    before = snapshot()
    ran = manage(*argv)
    assert ran.code == 2 and f"{code}:" in ran.err, ran
    assert snapshot() == before


def test_the_cli_sets_and_shows_budgets_and_quotas(db):
    ran = manage("--actor", ADMIN, "budget-set", "--tenant", "acme", "--task-tokens", "0", "--tenant-tokens", "900")
    assert ran.code == 0 and "task 0, tree none, tenant 900" in ran.out, ran
    assert manage("--actor", ADMIN, "quota-set", "echo", "--tenant", "acme", "--calls", "5", "--window", "60").code == 0
    shown = manage("budgets", "--tenant", "acme")
    assert "unlimited" not in shown.out.splitlines()[3] and "echo" in shown.out, shown
