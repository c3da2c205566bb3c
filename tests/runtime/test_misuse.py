"""Calls that cannot be journaled fail the task with NOT_JOURNALABLE, even when agent
code tries to catch them: the call already took its seq, and carrying on would leave a
hole that no later attempt could replay past."""

from runtime import states
from runtime.agents import agent
from runtime.models import Effect, Task
from tests.agents import submit as submit_to_service
from tests.runtime.inprocess import run, submit


@agent("misuse.wait_for_a_stranger")
def wait_for_a_stranger(ctx, input):
    try:
        ctx.wait([input["stranger"]])
    except Exception:
        return {"swallowed": True}
    return {"waited": True}


@agent("misuse.reuse_a_key")
def reuse_a_key(ctx, input):
    try:
        ctx.effect("send", submit_to_service, input["url"], {}, effect_class="reversible", keyed=True, key=input["key"])
    except Exception:
        return {"swallowed": True}
    return {"sent": True}


def test_waiting_for_a_task_that_is_not_a_child_fails_the_task(live):
    stranger = submit("t.steps", {"n": 1})
    waiter = submit("misuse.wait_for_a_stranger", {"stranger": str(stranger)})
    run()

    task = Task.objects.get(id=waiter)
    assert task.status == states.FAILED
    assert task.error["code"] == "NOT_JOURNALABLE"
    assert str(stranger) in task.error["message"]


def test_an_explicit_effect_key_used_by_another_task_fails_the_second_task_without_a_call(live, fake):
    first = submit("misuse.reuse_a_key", {"url": fake.url, "key": "shared-key"})
    run()
    second = submit("misuse.reuse_a_key", {"url": fake.url, "key": "shared-key"})
    run()

    assert Task.objects.get(id=first).output == {"sent": True}
    failed = Task.objects.get(id=second)
    assert failed.status == states.FAILED
    assert failed.error["code"] == "NOT_JOURNALABLE"
    assert fake.performed_by_key() == {"shared-key": 1}
    assert list(Effect.objects.values_list("task_id", flat=True)) == [first]
