"""`manage.py steward approvals list|show|approve|deny`."""

from __future__ import annotations

from runtime import states
from runtime.models import Approval, Task
from tests.runtime.approvals.test_approvals import sent, world
from tests.runtime.inprocess import run, submit
from tests.runtime.test_cli import refused, steward


def test_list_show_and_approve_from_the_terminal(live):
    sent.clear()
    world.update(amount=10, etag="v1")
    task_id = submit("approvals.pay", {"memo": "from the cli"})
    run()
    approval = Approval.objects.get(task_id=task_id)

    assert str(approval.id) in steward("approvals", "list", "--tenant", "acme")
    shown = steward("approvals", "show", str(approval.id), "--tenant", "acme")
    assert 'memo: "from the cli"' in shown and 'precondition: "v1"' in shown and "irreversible" in shown
    assert refused("--actor", "user:alice", "approvals", "approve", str(approval.id), "--tenant", "acme").startswith(
        "SELF_APPROVAL_REFUSED"
    )
    assert refused(
        "--actor", "agent:approvals.pay", "approvals", "approve", str(approval.id), "--tenant", "acme"
    ).startswith("APPROVAL_REQUIRES_PERSON")
    out = steward(
        "--actor", "user:dave", "approvals", "approve", str(approval.id), "--tenant", "acme", "--comment", "fine"
    )
    assert out.startswith("approved")
    assert refused("--actor", "user:dave", "approvals", "deny", str(approval.id), "--tenant", "acme").startswith(
        "APPROVAL_ALREADY_DECIDED"
    )
    assert refused("--actor", "user:dave", "approvals", "deny", "nope", "--tenant", "acme").startswith(
        "APPROVAL_NOT_FOUND"
    )
    run()
    assert Task.objects.get(id=task_id).status == states.COMPLETED and sent["pay"] == 1
