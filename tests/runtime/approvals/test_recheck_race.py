"""A grant change racing an approval's re-check (docs/adr/0017-approvals.md): the context
digest is recomputed from the authz_revision the re-check read, and its outcome is
written only if that revision still stands (runtime/sql/approval_check.sql), so a change
that commits in between makes the package stale, never consumed on the old revision."""

from __future__ import annotations

import threading

from django.db import connection

from runtime import states
from runtime.agents import agent
from runtime.approvals import package
from runtime.approvals.services import approval_decide
from runtime.authz.services import grant_create
from runtime.models import Approval, Task
from tests.runtime.inprocess import run, submit


@agent("approvals.recheck")
def recheck_agent(ctx, input):
    return {"state": ctx.request_approval({"op": "recheck"}, effect_class="reversible", expires_in=600).state}


def _grant_change():
    try:
        grant_create(tenant="acme", principal="user:alice", action="note.write", resource="note:x", actor="user:alice")
    finally:
        connection.close()


def test_a_grant_change_between_the_rechecks_read_and_its_write_makes_the_package_stale(live, monkeypatch):
    task_id = submit("approvals.recheck")
    run()
    approval = Approval.objects.get(task_id=task_id)
    approval_decide(approval_id=approval.id, tenant="acme", actor="user:bob", decision="approve")
    original = package.changed

    def changed_meanwhile(stored, built, ctx):
        # After the read, before the write: a grant change commits on its own connection
        # (this one runs agent code, which may not write grants).
        monkeypatch.setattr(package, "changed", original)
        other = threading.Thread(target=_grant_change)
        other.start()
        other.join(10)
        return original(stored, built, ctx)

    monkeypatch.setattr(package, "changed", changed_meanwhile)
    run()
    approval.refresh_from_db()
    assert (approval.state, approval.stale_reason) == (states.STALE, "the context changed: authz_revision")
    assert Task.objects.get(id=task_id).output == {"state": states.STALE}
