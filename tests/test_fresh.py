"""tests/fresh.py: what a committed test changed is put back, row for row, and nothing else
is touched; the audit trail's refusal to delete does not stop it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from console.models import Membership
from runtime.models import AuditEvent, Task
from runtime.tasks.services import task_submit
from tests.fresh import Baseline, fingerprints
from tests.people import make_people

pytestmark = pytest.mark.django_db(transaction=True)

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}


@pytest.fixture
def baseline():
    """A baseline of its own schema: the session's (tests/conftest.py) stays as it is."""
    kept = Baseline(connection, schema="steward_test_baseline_check")
    yield kept
    with connection.cursor() as cur:
        cur.execute("DROP SCHEMA IF EXISTS steward_test_baseline_check CASCADE")


def test_a_tests_rows_go_and_the_baselines_come_back_with_their_ids(baseline):
    people = make_people()
    kept_task = task_submit(agent="t.steps", input={"n": 1}, **ALICE).task_id
    baseline.capture()
    audit = list(AuditEvent.objects.order_by("id").values_list("id", "kind"))

    task_submit(agent="t.steps", input={"n": 2}, **ALICE)  # added
    Membership.objects.filter(user=people.bob).update(role="admin")  # changed
    get_user_model().objects.filter(username="carol").delete()  # removed
    assert AuditEvent.objects.count() > 1

    assert baseline.restore()

    assert fingerprints(connection, baseline.tables) == baseline.seen
    assert list(Task.objects.values_list("id", flat=True)) == [kept_task]
    assert Membership.objects.get(user=people.bob).role == "viewer"
    assert get_user_model().objects.get(username="carol").id == people.carol.id
    # The audit rows the later submit made are gone: its triggers refuse DELETE to
    # everything but this reset (session_replication_role, in the reset's transaction only).
    assert list(AuditEvent.objects.order_by("id").values_list("id", "kind")) == audit
    with pytest.raises(Exception, match="append-only|refuse|not allowed|cannot"):
        AuditEvent.objects.all().delete()


def test_a_table_the_test_did_not_change_is_not_rewritten(baseline):
    make_people()
    baseline.capture()
    before = _row_versions("django_content_type"), _row_versions("auth_user")
    task_submit(agent="t.steps", input={"n": 2}, **ALICE)
    assert baseline.restore()
    assert (_row_versions("django_content_type"), _row_versions("auth_user")) == before


def _row_versions(table: str) -> list[tuple]:
    """Each row's (ctid, xmin): a DELETE and re-INSERT would give every row new ones."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT ctid::text, xmin::text FROM {table} ORDER BY ctid")
        return cur.fetchall()
