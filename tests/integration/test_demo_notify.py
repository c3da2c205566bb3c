"""The demo's notify.send meets an unknown effect, as `make run` arranges it: its service
performs the first send and drops the connection (console/dev/run.py starts it with
--drop-every), and an operator settles the effect with the README's two commands."""

import io
import re

import pytest
from django.core.management import call_command

from console.dev.demo.fake_service import FakeService
from runtime import states
from runtime.models import Effect, Task
from runtime.tasks.services import task_submit
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture
def fleet(shared_fleet):
    """Warm workers, lent to each test in turn (tests/harness.py WarmFleet)."""
    return shared_fleet


DEMO = {"tenant": "demo", "owner": "user:alice", "actor": "demo-seed"}


def steward(*args: str) -> str:
    out = io.StringIO()
    call_command("steward", "--actor", "user:alice", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def task_in(task_id, status: str):
    return Task.objects.filter(id=task_id, status=status).first()


@pytest.mark.parametrize(
    ("resolve", "sent", "receipt"),
    [
        # The operator checked the service and records its receipt: nothing is sent again.
        (["--as", "committed", "--receipt", '{"op_id": "op-0001"}'], 1, lambda key: {"op_id": "op-0001"}),
        # The operator asks for a second send: the service answers this one.
        (["--as", "retry"], 2, lambda key: {"op_id": "op-0002", "key": key, "deduplicated": False}),
    ],
    ids=["committed", "retry"],
)
def test_a_dropped_notification_blocks_on_an_unknown_effect_until_an_operator_resolves_it(
    live, fleet, resolve, sent, receipt
):
    fleet.workers(1)
    with FakeService(mode="unkeyed", drop_every=3) as notify:
        task_id = task_submit(
            agent="notify.send",
            input={"to": "oncall@example.com", "message": "started", "notify_url": notify.url},
            **DEMO,
        ).task_id

        blocked = wait_until(lambda: task_in(task_id, states.BLOCKED), message="the task to block")
        effect = Effect.objects.get(task_id=task_id)
        # The service acted, but no answer came back: neither sent twice nor assumed failed.
        assert (effect.state, effect.sends, effect.effect_class) == (states.UNKNOWN, 1, states.IRREVERSIBLE)
        assert [(c["outcome"], c["answered"]) for c in notify.calls()] == [("performed", False)]
        assert f"#{effect.id}" in blocked.status_note

        listed = steward("effects", "--state", "unknown")
        assert re.search(rf"^{effect.id} +{task_id} +send +irreversible +unknown +1 ", listed, re.M), listed
        steward("resolve-effect", str(effect.id), *resolve)

        done = wait_until(lambda: task_in(task_id, states.COMPLETED), message="the task to complete")
        assert done.output == {"receipt": receipt(effect.key)}
        assert notify.performed_count() == sent  # a retry is the operator's choice, never automatic
