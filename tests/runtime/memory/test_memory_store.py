"""The memory table's invariants in PostgreSQL: the worker role may add versions and
change none but to its tombstone; the compare-and-set lets exactly one of many racing writers win; an erased
payload reads as no record; the CLI's rollback prints the effects it cannot undo."""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, connections, transaction
from django.db.models.functions import Now

from runtime import roles, states
from runtime.memory import services
from runtime.memory.selectors import readable
from runtime.models import MemoryRecord
from tests.runtime.memory import kinds  # noqa: F401  (declares test_note)

WORKER = roles.ROLE_NAMES["worker"]


def _privileges(role: str) -> dict[str, bool]:
    with connection.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role])
        if cur.fetchone() is None:
            pytest.skip(f"no role {role} in this database")
        return {
            p: bool(cur.execute("SELECT has_table_privilege(%s, 'steward_memory_record', %s)", [role, p]).fetchone()[0])
            for p in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE")
        }


@pytest.mark.django_db
def test_the_worker_role_may_read_and_add_versions_but_change_or_delete_none():
    assert _privileges(WORKER) == {"SELECT": True, "INSERT": True, "UPDATE": False, "DELETE": False, "TRUNCATE": False}
    # Only the tombstone's columns, for the retention job (the table's trigger holds their values).
    with connection.cursor() as cur:
        movable = {
            column
            for column in ("payload", "erased_at", "erased_by", "erased_hash", "payload_hash", "version", "agent")
            if cur.execute(
                "SELECT has_column_privilege(%s, 'steward_memory_record', %s, 'UPDATE')", [WORKER, column]
            ).fetchone()[0]
        }
    assert movable == {"payload", "erased_at", "erased_by", "erased_hash"}


@pytest.mark.django_db
def test_the_web_role_may_erase_a_payload_and_a_version_number_is_taken_once():
    made = services.memory_put(
        tenant="acme", agent="a", kind="test_note", key="k", value={"text": "x"}, actor="user:alice"
    )
    row = MemoryRecord.objects.get(id=made.id)
    # Erasure's write (issue 25's retention helper): the payload goes, the hash stays.
    erased = {"payload": None, "erased_at": Now(), "erased_by": "retention:test"}
    assert MemoryRecord.objects.filter(id=row.id).update(**erased) == 1
    assert readable(tenant="acme", agent="a", kind="test_note", key="k") is not None  # current, in its window
    fields = {"tenant": "acme", "agent": "a", "kind": "test_note", "schema_version": 1, "payload": {}}
    fields |= {"payload_hash": "0" * 64, "change": "write", "actor": "x"}
    with pytest.raises(IntegrityError, match="memory_version_once"), transaction.atomic():
        MemoryRecord.objects.create(**fields, key="k", version=1, source="agent", untrusted=False)
    with pytest.raises(IntegrityError, match="memory_untrusted_is_its_source"), transaction.atomic():
        MemoryRecord.objects.create(**fields, key="k2", version=1, source="model", untrusted=False)


@pytest.mark.django_db
def test_a_record_whose_current_payload_was_erased_reads_as_none_to_its_agent():
    from runtime.testing import StewardTestEnv

    with StewardTestEnv() as env:
        services.memory_put(
            tenant="acme", agent="memory.reader", kind="test_note", key="gone", value={"text": "x"}, actor="user:alice"
        )
        MemoryRecord.objects.filter(key="gone").update(payload=None, erased_at=Now(), erased_by="retention:test")
        task = env.submit("memory.reader", {"key": "gone"})
        env.run_until_idle()
        assert env.result(task).output == {"found": None}


TRIALS, WRITERS = 5, 6


@pytest.mark.django_db(transaction=True)
def test_of_many_writers_racing_on_one_version_exactly_one_wins_every_trial():
    outcomes = []
    for trial in range(TRIALS):
        key = f"race-{trial}"
        services.memory_put(
            tenant="acme", agent="a", kind="test_note", key=key, value={"text": "0"}, actor="user:alice"
        )
        barrier = threading.Barrier(WRITERS)
        won: list[bool] = []

        def write(n: int, key=key, barrier=barrier, won=won) -> None:
            try:
                barrier.wait()
                made = services.memory_put(
                    tenant="acme",
                    agent="a",
                    kind="test_note",
                    key=key,
                    value={"text": str(n)},
                    actor="user:alice",
                    expected_version=1,
                )
                won.append(made is not None)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        outcomes.append((won.count(True), won.count(False)))
        assert list(MemoryRecord.objects.filter(key=key).values_list("version", flat=True).order_by("version")) == [
            1,
            2,
        ]
    assert outcomes == [(1, WRITERS - 1)] * TRIALS


@pytest.mark.django_db
def test_the_cli_rolls_back_and_prints_the_effects_it_cannot_undo():
    from runtime.testing import StewardTestEnv

    with StewardTestEnv() as env:
        services.memory_put(
            tenant="acme", agent="memory.spender", kind="test_note", key="s", value={"text": "old"}, actor="user:alice"
        )
        task = env.submit("memory.spender")
        env.run_until_idle()
        assert env.result(task).status == states.COMPLETED
        services.memory_put(
            tenant="acme", agent="memory.spender", kind="test_note", key="s", value={"text": "new"}, actor="user:alice"
        )
        out = io.StringIO()
        call_command(
            "steward",
            "--actor",
            "user:alice",
            "memory",
            "rollback",
            "memory.spender",
            "test_note",
            "s",
            "1",
            "--tenant",
            "acme",
            "--reason",
            "undo",
            stdout=out,
        )
        text = out.getvalue()
        assert "v1 is current again as v3" in text
        assert "Effects since v1, which a rollback cannot undo:" in text and "pay" in text and str(task) in text
        shown = io.StringIO()
        call_command("steward", "memory", "show", "memory.spender", "test_note", "s", "--tenant", "acme", stdout=shown)
        assert "rollback" in shown.getvalue() and "v3 (valid)" in shown.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["memory", "list", "a"], "INVALID_ARGUMENT"),  # no --tenant
        (["memory", "show", "a", "test_note", "--tenant", "acme"], "INVALID_ARGUMENT"),  # too few
        (["memory", "show", "a", "test_note", "nobody", "--tenant", "acme"], "MEMORY_RECORD_NOT_FOUND"),
        (["memory", "rollback", "a", "test_note", "k", "x", "--tenant", "acme"], "INVALID_ARGUMENT"),
        (["memory", "rollback", "a", "test_note", "k", "99", "--tenant", "acme"], "MEMORY_RECORD_NOT_FOUND"),
        (["memory", "list", "a", "--tenant", "acme", "--kind", "k" * 500], "INVALID_INPUT"),
        (["memory", "upgrade", "--kind", "no_such_kind"], "MEMORY_KIND_UNKNOWN"),
        (["memory", "rollback", "a" * 201, "test_note", "k", "1", "--tenant", "acme"], "INVALID_IDENTIFIER"),
        (
            ["memory", "rollback", "a", "test_note", "k", "1", "--tenant", "acme", "--reason", "r" * 501],
            "INVALID_ARGUMENT",
        ),
    ],
)
def test_the_cli_refuses_with_a_stable_code_and_writes_nothing(argv, code):
    from django.core.management.base import CommandError

    before = MemoryRecord.objects.count()
    with pytest.raises(CommandError, match=f"^{code}:"):
        call_command("steward", *argv)
    assert MemoryRecord.objects.count() == before
