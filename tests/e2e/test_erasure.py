"""alice sets her tenant's retention after seeing what it would erase, then erases a task
tree: the preview names the rows per place, the receipt (at its own URL) records the same
counts and verifies; bob, a viewer, sees the receipts and no form."""

from __future__ import annotations

from playwright.sync_api import expect

from runtime.memory.services import memory_put
from runtime.models import ErasureReceipt, RetentionPolicy, Task
from runtime.testing import StewardTestEnv
from tests.e2e.stack import EVENT_MS, screenshot
from tests.runtime.lifecycle.test_erasure import FORGET
from tests.runtime.memory import kinds  # noqa: F401  (declares test_note)


def test_alice_previews_and_erases_a_tree_and_bob_only_reads_the_receipt(person):
    with StewardTestEnv(tenant="acme", owner="user:alice") as env:
        task = env.submit("lifecycle.keeper", {"secret": FORGET, "children": 2})
        env.run_until_idle()
    assert Task.objects.get(id=task).status == "completed"

    page = person("alice")
    page.goto("/retention/")
    form = page.locator("form[action$='/retention/set/']")
    for name, days in (("task_days", "30"), ("gateway_days", "30"), ("memory_days", "30"), ("decision_days", "30")):
        form.locator(f"[name={name}]").fill(days)
    form.locator("[name=audit_days]").fill("365")
    form.locator("[name=reason]").fill("our policy")
    form.get_by_role("button", name="Show what it would erase").click()
    expect(page.locator("#affects")).to_contain_text("Rows erased", timeout=EVENT_MS)
    assert not RetentionPolicy.objects.exists()  # a preview saves nothing
    screenshot(page, "retention")
    page.locator("form[action$='/retention/set/']").get_by_role("button", name="Save periods").click()
    expect(page.locator("#current")).to_contain_text("Version 1", timeout=EVENT_MS)
    assert RetentionPolicy.objects.get(tenant="acme").task_days == 30

    page.goto("/erasures/")
    request = page.locator("#request form").last
    request.locator("[name=kind]").select_option("task")
    request.locator("[name=value]").fill(str(task))
    request.get_by_role("button", name="Preview").click()
    expect(page.locator("#preview")).to_contain_text("of 3 tasks", timeout=EVENT_MS)
    screenshot(page, "erasure-preview")
    shown = page.locator("#preview h3").inner_text()
    confirm = page.locator("#preview form")
    confirm.locator("[name=reason]").fill("the customer asked")
    confirm.get_by_role("button", name="Erase").click()
    expect(page.locator("body")).to_contain_text("Verified", timeout=EVENT_MS)
    receipt = ErasureReceipt.objects.get()
    assert page.url.endswith(f"/erasures/{receipt.id}/")
    assert f"It will erase {receipt.rows} rows" in shown
    assert FORGET not in page.content()
    screenshot(page, "erasure-receipt")

    bob = person("bob")
    bob.goto("/erasures/")
    expect(bob.locator("#receipts")).to_contain_text("the customer asked")
    expect(bob.locator("#request")).to_have_count(0)


def test_alice_previews_an_agents_memory_erasure(person):
    memory_put(tenant="acme", agent="memory.reader", kind="test_note", key="k", value={"text": FORGET}, actor="u:a")
    page = person("alice")
    page.goto("/erasures/")
    request = page.locator("#request form").last
    request.locator("[name=kind]").select_option("agent")
    request.locator("[name=value]").fill("memory.reader")
    request.get_by_role("button", name="Preview").click()
    expect(page.locator("#preview")).to_contain_text("It will erase 1 rows of memory.reader's memory", timeout=EVENT_MS)
    screenshot(page, "erasure-agent-preview")
    confirm = page.locator("#preview form")
    confirm.locator("[name=reason]").fill("forget me")
    confirm.get_by_role("button", name="Erase").click()
    expect(page.locator("body")).to_contain_text("Verified", timeout=EVENT_MS)
    assert ErasureReceipt.objects.get().subject_kind == "agent"
