"""dave, admin of acme, makes bob an operator from the members screen: the confirmation
says what bob may do from then on before anything changes, and the audit row names dave
and the console."""

from __future__ import annotations

from playwright.sync_api import expect

from console.models import Membership
from runtime.models import AuditEvent
from tests.e2e.stack import EVENT_MS, EVENT_S, screenshot
from tests.harness import wait_until


def test_dave_reads_what_a_role_change_does_then_makes_bob_an_operator(person):
    page = person("dave")
    page.goto("/members/")
    expect(page.locator("body")).to_contain_text("bob")
    screenshot(page, "members")

    row = page.locator("tr", has=page.locator("form[action$='/members/bob/role/']"))
    row.locator("select[name=role]").select_option("operator")
    row.get_by_role("button", name="Change role…").click()

    consequence = page.locator("#consequence")
    expect(consequence).to_contain_text("bob becomes operator of acme", timeout=EVENT_MS)
    assert Membership.objects.get(user__username="bob", tenant_id="acme").role == "viewer"  # nothing yet
    screenshot(page, "member-role")
    page.get_by_role("button", name="Make bob operator").click()

    wait_until(
        lambda: Membership.objects.get(user__username="bob", tenant_id="acme").role == "operator",
        timeout=EVENT_S,
        message="bob to be an operator",
    )
    event = AuditEvent.objects.filter(tenant="acme", kind="member.role").latest("id")
    assert event.actor == "user:dave" and event.data["via"]["channel"] == "console"
    assert (event.data["from"], event.data["role"]) == ("viewer", "operator")
