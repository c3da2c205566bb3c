"""Journey 2: a worker is killed (SIGKILL) after an unkeyed service acted and before its
receipt was recorded; recovery cannot re-send, so the effect is `unknown` and the task
`blocked`. alice sees it blocked in the browser, resolves the effect as committed with
the receipt the service gave, and the task completes, without the call being made twice."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from runtime import states
from runtime.models import AuditEvent, Effect, Task
from tests.e2e.stack import EVENT_MS, EVENT_S, screenshot
from tests.faults.support import armed, sigkill, submit, wait_marker, worker_name
from tests.harness import wait_until

POINT = "after_effect_before_receipt@submit"  # the service acted; no receipt yet (tests/agents.py t.effect)


def choose(page, name: str, value: str) -> None:
    """Pick `value` for the field `name`, a <select> or radio buttons."""
    field = page.locator(f"[name={name}]")
    expect(field.first).to_be_attached()
    if field.first.evaluate("el => el.tagName") == "SELECT":
        field.first.select_option(value)
    else:
        page.locator(f"[name={name}][value={value}]").check()


def test_alice_resolves_an_interrupted_unkeyed_effect_in_the_browser_and_the_task_completes(
    person, fleet, fake, tmp_path
):
    # Unkeyed: this service performs every call it gets, so a re-send would act twice.
    fake.set_mode("unkeyed")
    env = armed(tmp_path, POINT)
    fleet.supervisors(1)
    fleet.workers(2, env=env)  # the first to reach the point holds there; the other recovers
    task_id = submit("t.effect", {"url": fake.url, "keyed": False, "effect_class": "irreversible"}).task_id

    page = person("alice")
    page.goto(f"/tasks/{task_id}/")
    status = page.locator("#task-status")

    _, held = wait_marker(tmp_path, task_id, POINT, timeout=EVENT_S)
    sigkill(fleet, held["pid"])
    assert fake.performed_count() == 1  # it acted, and no receipt came back to the ledger

    # The lease expires, the recovery cannot know whether the call happened: blocked.
    expect(status).to_have_attribute("data-status", states.BLOCKED, timeout=EVENT_MS)
    expect(status).to_contain_text(states.BLOCKED)
    effect = Effect.objects.get(task_id=task_id)
    assert (effect.state, effect.keyed, effect.sends) == (states.UNKNOWN, False, 1)
    assert Task.objects.get(id=task_id).attempts.filter(epoch=1, worker=worker_name(held["pid"])).exists()

    page.goto("/effects/")
    row = page.locator(f"#effect-{effect.id}")
    expect(row).to_have_attribute("data-state", states.UNKNOWN)
    expect(row).to_contain_text(str(task_id)[:8])
    screenshot(page, "effects")
    row.locator(f"a[href*='/effects/{effect.id}/']").first.click()
    page.wait_for_url(f"**/effects/{effect.id}/")
    screenshot(page, "effect-detail")

    # alice asked the service: it did perform the call, and this is its receipt.
    receipt = {"op_id": fake.calls()[0]["op_id"], "checked_by": "alice"}
    choose(page, "outcome", "committed")
    page.fill("[name=receipt]", json.dumps(receipt))
    page.fill("[name=note]", "the service's log shows the notification went out")
    page.get_by_role("button", name="Resolve").click()
    wait_until(
        lambda: Effect.objects.filter(id=effect.id, state=states.COMMITTED).exists(),
        timeout=EVENT_S,
        message="alice's resolution to be recorded",
    )

    page.goto(f"/tasks/{task_id}/")
    expect(page.locator("#task-status")).to_have_attribute("data-status", states.COMPLETED, timeout=EVENT_MS)

    task = wait_until(
        lambda: Task.objects.filter(id=task_id, status=states.COMPLETED).first(),
        timeout=EVENT_S,
        message="the task to complete",
    )
    effect.refresh_from_db()
    assert (effect.state, effect.receipt, effect.sends) == (states.COMMITTED, receipt, 1)
    assert task.output == {"receipt": receipt}
    assert fake.performed_count() == 1  # never sent again
    resolved = AuditEvent.objects.get(task_id=task_id, kind="effect.resolved")
    assert resolved.actor == "user:alice" and resolved.data["via"]["channel"] == "console"
