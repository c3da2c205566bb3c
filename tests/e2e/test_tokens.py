"""alice makes an API token in the console: its secret is shown once, only its digest is
kept, and she revokes it from the list."""

from __future__ import annotations

import hashlib

from playwright.sync_api import expect

from console.models import ApiToken
from tests.e2e.stack import EVENT_MS, EVENT_S, screenshot
from tests.harness import wait_until


def test_alice_creates_a_token_whose_secret_is_shown_once_and_revokes_it(person):
    page = person("alice")
    page.goto("/tokens/")
    form = page.locator("form[action$='/tokens/new/']")
    form.locator("[name=name]").fill("nightly report")
    scope = form.locator("[name=scope]")
    if scope.count() and scope.first.evaluate("el => el.tagName") == "SELECT":
        scope.first.select_option("read")
    elif scope.count():
        form.locator("[name=scope][value=read]").check()
    form.locator("button[type=submit], button:not([type])").first.click()

    shown = page.locator("#token-secret")
    expect(shown).to_be_visible(timeout=EVENT_MS)
    secret = shown.inner_text().strip()
    assert secret.startswith("stw_")
    token = ApiToken.objects.get(user__username="alice", tenant_id="acme", name="nightly report")
    assert bytes(token.digest) == hashlib.sha256(secret.encode()).digest() and token.scope == "read"
    screenshot(page, "tokens")

    page.goto("/tokens/")  # shown once: never again
    expect(page.locator("body")).to_contain_text("nightly report")
    assert secret not in page.content()
    expect(page.locator("#token-secret")).to_have_count(0)

    revoke = page.locator(f"a[href$='/tokens/{token.id}/revoke/']")
    revoke.click()
    # The confirmation says what revoking does before anything is done.
    expect(page.locator("#consequence")).to_contain_text("refused (401 AUTH_REQUIRED) from its very next request")
    assert ApiToken.objects.get(id=token.id).revoked_at is None
    page.get_by_role("button", name="Revoke token").click()
    token = wait_until(
        lambda: ApiToken.objects.filter(id=token.id, revoked_at__isnull=False).first(),
        timeout=EVENT_S,
        message="the token to be revoked",
    )
    assert token.revoked_by == "user:alice"
    expect(revoke).to_have_count(0, timeout=EVENT_MS)  # a revoked token offers no second revoke
