"""Journey 4: bob, a viewer of acme, sees all of acme (tasks, a task's page, the effects,
the pools, the audit trail) but is offered no action, and each action he crafts himself
(a POST with a valid CSRF token taken from a page) is refused with 403 and changes nothing."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from runtime import states
from runtime.models import AuditEvent, Effect, Pool, Task
from tests.e2e.stack import csrf_token, screenshot

# Every way the console offers an action: its link or form by URL, its button by name.
ACTION_LINKS = ("/cancel/", "/stop/", "/reopen/", "/rerun/", "/resume/", "/resolve/", "/limits/", "/tasks/new/")
ACTION_BUTTONS = ("Cancel", "Stop", "Resume", "Resolve", "Submit task", "Save limits", "Save")


def actions_offered(page) -> list[str]:
    """Each action the page offers: a link, form or htmx attribute to an action's URL, or
    a button named like one."""
    offered = []
    for fragment in ACTION_LINKS:
        found = page.locator(
            f"a[href*='{fragment}'], form[action*='{fragment}'], [hx-post*='{fragment}'], [hx-get*='{fragment}']"
        )
        offered += [f"{fragment}: {html}" for html in found.evaluate_all("els => els.map(e => e.outerHTML)")]
    for name in ACTION_BUTTONS:
        if page.get_by_role("button", name=name, exact=True).count():
            offered.append(f"a {name!r} button")
    return offered


def assert_no_action_offered(page) -> None:
    offered = actions_offered(page)
    assert offered == [], f"{page.url} offers bob: {offered}"


def test_bob_sees_all_of_acme_but_is_offered_no_action_and_each_crafted_action_is_refused(person, acme):
    page = person("bob")

    page.goto("/tasks/")
    for task in (acme.blocked, acme.done):
        expect(page.locator(f"#task-{task.id}")).to_have_attribute("data-status", task.status)
    assert_no_action_offered(page)

    page.goto(f"/tasks/{acme.blocked.id}/")
    expect(page.locator("#task-status")).to_have_attribute("data-status", states.BLOCKED)
    expect(page.locator(f"#effect-{acme.effect.id}")).to_have_attribute("data-state", states.UNKNOWN)
    assert_no_action_offered(page)

    page.goto(f"/tasks/{acme.done.id}/")
    expect(page.locator("#task-status")).to_have_attribute("data-status", states.COMPLETED)
    assert_no_action_offered(page)

    page.goto("/effects/")
    expect(page.locator(f"#effect-{acme.effect.id}")).to_have_attribute("data-state", states.UNKNOWN)
    assert_no_action_offered(page)
    page.goto(f"/effects/{acme.effect.id}/")
    expect(page.locator("body")).to_contain_text(acme.effect.key)
    assert_no_action_offered(page)

    page.goto("/pools/")
    expect(page.locator("body")).to_contain_text(acme.pool)
    assert_no_action_offered(page)
    page.goto(f"/pools/{acme.pool}/")
    expect(page.locator("body")).to_contain_text(acme.pool)
    assert_no_action_offered(page)

    page.goto("/audit/")
    expect(page.locator(f"#audit-{acme.event.id}")).to_be_visible()
    page.goto(f"/audit/{acme.event.id}/")
    expect(page.locator("body")).to_contain_text(acme.event.kind)

    # The same pages offer alice, an operator, each action bob was not offered: the
    # checks above would have seen them.
    alice = person("alice")
    for url, fragment in (
        (f"/tasks/{acme.blocked.id}/", "/stop/"),
        (f"/effects/{acme.effect.id}/", "/resolve/"),
        (f"/pools/{acme.pool}/", "/limits/"),
        ("/tasks/", "/tasks/new/"),
    ):
        alice.goto(url)
        offered = actions_offered(alice)
        assert any(offer.startswith(fragment) for offer in offered), f"alice is not offered {fragment} at {url}"
        if fragment == "/limits/":
            screenshot(alice, "pool")
    alice.goto(f"/tasks/{acme.blocked.id}/stop/")  # the confirmation alice would get, not sent
    expect(alice.locator("[name=reason]")).to_be_visible()

    # Now as a person with the devtools open: a token from the page, the POSTs by hand.
    page.goto("/tasks/")
    token = csrf_token(page)

    def post(url: str, form: dict, *, htmx: bool = False):
        headers = {"X-CSRFToken": token, **({"HX-Request": "true"} if htmx else {})}
        return page.request.post(url, form={"csrfmiddlewaretoken": token, **form}, headers=headers, max_redirects=0)

    # The token is good: the same POST of something bob may do (pick his own tenant) passes
    # CSRF, so each 403 below is the console's refusal, not Django's CSRF check.
    allowed = post("/tenant/", {"tenant": "acme"})
    assert allowed.status < 400, f"bob's own POST was refused ({allowed.status}): {allowed.text()[:300]}"

    pool = Pool.objects.get(name=acme.pool)
    limits = (pool.max_running, pool.max_queued)
    tasks_before = Task.objects.count()
    actions = {
        "submit": ("/tasks/new/", {"agent": "t.steps", "input": json.dumps({"n": 1}), "idempotency_key": "bob"}),
        "cancel": (f"/tasks/{acme.blocked.id}/cancel/", {"reason": "bob tries"}),
        "stop": (f"/tasks/{acme.blocked.id}/stop/", {"reason": "bob tries"}),
        "resume": (f"/tasks/{acme.blocked.id}/resume/", {"reason": "bob tries"}),
        "resolve": (
            f"/effects/{acme.effect.id}/resolve/",
            {"outcome": states.COMMITTED, "receipt": json.dumps({"op_id": "bob"}), "note": "bob tries"},
        ),
        "limits": (
            f"/pools/{acme.pool}/limits/",
            {"max_running": pool.max_running + 1, "max_queued": pool.max_queued + 1},
        ),
    }
    refused = {}
    for name, (url, form) in actions.items():
        for htmx in (False, True):
            response = post(url, form, htmx=htmx)
            refused[(name, htmx)] = response.status
            assert "CSRF verification failed" not in response.text(), f"{name}: refused by Django's CSRF check"
    assert refused == {key: 403 for key in refused}

    # And nothing happened.
    assert Task.objects.count() == tasks_before
    assert Task.objects.get(id=acme.blocked.id).status == states.BLOCKED
    assert Effect.objects.get(id=acme.effect.id).state == states.UNKNOWN
    pool.refresh_from_db()
    assert (pool.max_running, pool.max_queued) == limits
    assert not AuditEvent.objects.filter(actor="user:bob").exclude(kind__startswith="session.").exists()
