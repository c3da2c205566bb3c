"""Sign-in throttling in the browser (issue 17): alice's guesser fails STEWARD_SIGNIN_FAILURE_LIMIT
times and the sign-in page then says the account is locked, for the right password too,
as a 429; her API token still works, bob (another account, another address) signs in,
an address that guessed at several names is locked for everyone, and the admin's sign-in
is locked with the console's. Its own web server, with a limit of 3 and behind a trusted
X-Forwarded-For (each browser context sends its own address, as a proxy would write it).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from console.access import token_create
from console.signin import LOCKED_OUT
from runtime.models import AuditEvent
from tests.e2e.stack import EVENT_MS, VIEWPORT, login, screenshot, serving
from tests.people import PASSWORD

LIMIT = 3
COOL_OFF_MINUTES = 10
LOCKED = "Too many failed sign-ins for this account or from this address"


@pytest.fixture(scope="module")
def throttled_web(child_env):
    env = {
        **child_env,
        "STEWARD_DEBUG": "1",
        "PYTHONUNBUFFERED": "1",
        "STEWARD_SIGNIN_FAILURE_LIMIT": str(LIMIT),
        "STEWARD_SIGNIN_COOLOFF_SECONDS": str(COOL_OFF_MINUTES * 60),
        "STEWARD_CLIENT_IP_HEADER": "X-Forwarded-For",
    }
    with serving(env) as server:
        yield server


@pytest.fixture
def from_address(browser, throttled_web):
    """from_address("203.0.113.10"): a page in a fresh browser context whose requests reach
    the server as if a proxy had written that client address."""
    contexts = []

    def open_from(address: str) -> Page:
        context = browser.new_context(
            base_url=throttled_web.url, viewport=VIEWPORT, extra_http_headers={"X-Forwarded-For": address}
        )
        context.set_default_timeout(30_000)
        contexts.append(context)
        return context.new_page()

    yield open_from
    for context in contexts:
        context.close()


def try_sign_in(page: Page, username: str, password: str, path: str = "/login/") -> int:
    """Fill the sign-in form and send it as a person would; the status of the answer."""
    page.goto(path)
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    with page.expect_response(lambda r: r.request.method == "POST" and path in r.url, timeout=EVENT_MS) as answer:
        page.locator("form [type=submit]").first.click()
    page.wait_for_load_state()
    return answer.value.status


def test_a_locked_account_is_told_so_its_tokens_work_and_others_sign_in(people, from_address, alice_principal):
    secret = token_create(principal=alice_principal, name="nightly", scope="read").secret
    guesser = from_address("203.0.113.10")
    for _ in range(LIMIT - 1):
        assert try_sign_in(guesser, "alice", "not her password") == 200
        expect(guesser.locator("[role=alert]")).to_have_text("That username and password do not match. Try again.")
    assert try_sign_in(guesser, "alice", "not her password") == 429
    alert = guesser.locator("[role=alert]")
    expect(alert).to_contain_text(LOCKED)
    expect(alert).to_contain_text(f"locked for {COOL_OFF_MINUTES} minutes")
    screenshot(guesser, "signin-locked")

    # The right password, from another address, in a fresh browser: still locked.
    alice = from_address("198.51.100.20")
    assert try_sign_in(alice, "alice", PASSWORD) == 429
    expect(alice.locator("[role=alert]")).to_contain_text(LOCKED)
    assert alice.url.endswith("/login/")
    # The admin's sign-in counts and refuses the same account.
    assert try_sign_in(alice, "alice", PASSWORD, path="/admin/login/") == 429
    expect(alice.locator(".errornote, .errorlist")).to_contain_text(LOCKED)

    # Her API token is no sign-in: it keeps working, from the guesser's address too.
    api = guesser.context.request.get("/api/v1/tasks", headers={"Authorization": f"Bearer {secret}"})
    assert api.status == 200, api.text()[:300]

    # bob, another account from another address, signs in as ever.
    bob = from_address("198.51.100.21")
    login(bob, "bob")
    expect(bob.locator("body")).to_contain_text("bob")

    events = AuditEvent.objects.filter(kind=LOCKED_OUT).order_by("id")
    assert [(e.tenant, e.data["about"]) for e in events] == [
        ("system", "account:alice"),
        ("system", "address:203.0.113.10"),
    ], "one event for the account and one for the guesser's address, however many refusals followed"


def test_an_address_that_guesses_at_several_names_is_locked_for_everyone(people, from_address):
    guesser = from_address("192.0.2.77")
    for name in ("admin", "root", "alice")[:LIMIT]:
        try_sign_in(guesser, name, "guess")
    assert try_sign_in(guesser, "carol", PASSWORD) == 429
    expect(guesser.locator("[role=alert]")).to_contain_text(LOCKED)
    # carol herself, from her own address, is not locked out.
    carol = from_address("192.0.2.78")
    login(carol, "carol")
    assert AuditEvent.objects.filter(kind=LOCKED_OUT, data__about="address:192.0.2.77").count() == 1
