"""Agent code running inside a real worker process cannot sign a capability token: the
process holds no signing key (not in its environment, its settings, or this install's
debug secrets it read), token_mint has nothing to sign with, and the minting service
gives its worker no token for a task it does not hold, another tenant's included
(docs/adr/0034-token-minting.md). Its own attempt's token it does get."""

from __future__ import annotations

import pytest

from runtime import states
from runtime.authz.credentials import worker_credential_create
from runtime.models import AuditEvent, Task
from runtime.tasks.services import task_submit
from tests.console.gateway.test_minting import claimed
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


def test_agent_code_in_a_worker_holds_no_signing_key_and_cannot_mint_for_another_task(
    live, fleet, gateway_web, settings
):
    # Another tenant's running task, held by another worker.
    other = claimed(settings, worker_credential_create(name="other", actor="user:dave").secret, tenant="globex")
    (worker,) = fleet.workers(1, env={"STEWARD_GATEWAY_URL": gateway_web.url})
    t = task_submit(
        agent="t.hostile_mint",
        input={"other": str(other.task_id), "epoch": other.epoch},
        tenant="acme",
        owner="user:alice",
        actor="user:alice",
    ).task_id
    task = wait_until(
        lambda: Task.objects.filter(id=t, status__in=(states.COMPLETED, states.FAILED)).first(),
        timeout=60,
        message="the hostile agent to finish",
    )
    assert task.status == states.COMPLETED, task.error
    assert task.output == {
        "process": "worker",
        "environ": [],
        "settings": False,
        "config": False,
        "dev_secrets": False,
        "secret": "KeyError",  # this process never kept the debug key, even in memory
        "token_mint": "ImproperlyConfigured",  # nothing to sign with
        "service": [403, "TOKEN_REFUSED", "not_your_attempt"],
        "own": True,
    }
    (refused,) = AuditEvent.objects.filter(kind="capability.refused", task_id=other.task_id)
    assert refused.actor == f"worker_credential:{worker.credential}" and refused.tenant == "globex"
    assert AuditEvent.objects.filter(kind="capability.minted", task_id=t).count() == 1
