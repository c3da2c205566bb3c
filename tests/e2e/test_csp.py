"""The Content-Security-Policy in Chromium (console/csp.py, docs/adr/0024-deployment-hardening.md):
every console route (console/ui/urls.py ROUTES, with real ids from acme) as alice, an
operator, and as dave, an admin; the Django admin's pages; the API's Swagger page and the
sign-in page, each served with the policy and none violating it. Under it the live parts
still work: a task's page follows the task to its end and then stops polling, the task
list's polls hold while the tab is hidden and resume when it shows, the dashboard draws
its charts, and the tenant switcher submits. (Every other journey also fails on a
violation: tests/e2e/conftest.py.)"""

from __future__ import annotations

import re
import secrets

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.urls import reverse
from playwright.sync_api import expect

from console.csp import policy
from console.models import VIEWER, Membership
from console.ui.urls import ROUTES
from runtime import states
from runtime.models import Task
from tests.e2e.stack import EVENT_MS, EVENT_S, VIEWPORT, mark_page, settled, still_same_page, watch_csp
from tests.faults.support import submit
from tests.harness import wait_until
from tests.people import PASSWORD

POLICY = policy(settings.SECURE_CSP)
PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>")


def route_urls(acme) -> dict[str, str]:
    """Each route's URL with real ids: the blocked task (its effect, its resume), the
    finished one for its journal, the stopped one for a new run."""
    by_object = {
        "task_id": {"task-step": acme.done.id, "task-steps": acme.done.id, "task-rerun": acme.stop.task_id},
        "name": {"pool": acme.pool, "agent": "t.steps", "memory": "t.steps"},
        "username": {"member": "bob"},
    }
    values = {
        "task_id": acme.blocked.id,
        "seq": acme.seq,
        "stop_id": acme.stop.id,
        "effect_id": acme.effect.id,
        "approval_id": acme.approval.id,
        "event_id": acme.event.id,
        "token_id": acme.token.id,
        "grant_id": acme.grant.id,
        "decision_id": acme.decision.id,
        "schedule_id": acme.schedule.id,
        "webhook_id": acme.webhook.id,
        "kind": acme.memory.kind,
        "key": acme.memory.key,
        "receipt_id": acme.erasure.id,
    }

    def value(route, name):
        special = by_object.get(name, {})
        return special.get(route.name, special.get(route.object, values.get(name)))

    urls = {}
    for route in ROUTES:
        url = "/" + PARAMETER.sub(lambda m, r=route: str(value(r, m.group(1))), route.pattern)
        assert "None" not in url, (route.name, url)
        urls[route.name] = url
    urls["owner"] = "/owners/alice/"
    urls["member-role"] += "?role=operator"
    return urls


# What each page must answer beside its policy: the screens 200; an action's page may be
# a confirmation, a redirect to its object, 405 (POST only: also signing out, switching
# tenant, verifying the trail) or 403 (alice on members).
def must_render(route, who: str) -> bool:
    members = route.name.startswith("member") and who != "dave"
    return not (
        route.action or route.fragment or route.public or members or route.name in {"logout", "tenant", "audit-verify"}
    )


def visit(page, url: str):
    response = page.goto(url)
    settled(page)
    return response


def visit_route(page, url: str):
    """The page in the browser; or, where there is no document to run (a download, a
    fragment's empty 204 while nothing moved, a POST-only route's empty 405: Chromium
    shows none of them), the answer itself, asked for first with the page's cookies."""
    answer = page.request.get(url)
    if not answer.headers.get("content-type", "").startswith("text/html") or not answer.body():
        return answer
    return visit(page, url)


def test_every_console_route_admin_page_and_the_api_docs_run_under_the_policy_without_a_violation(
    person, browser, web, acme
):
    urls = route_urls(acme)
    extra = [f"/tasks/{acme.done.id}/", "/tasks/?status=blocked", "/effects/?state=any", "/tasks/new/?agent=t.steps"]
    for who in ("alice", "dave"):
        page = person(who)
        for route in ROUTES:
            url = urls[route.name]
            response = visit_route(page, url)
            assert response.status < 500, (who, url, response.status)
            if must_render(route, who):
                assert response.status == 200, (who, url, response.status)
            assert response.headers.get("content-security-policy") == POLICY, (who, url)
        for url in [*extra, "/api/v1/docs"]:
            response = visit(page, url)
            assert response.status == 200, (who, url)
            assert response.headers.get("content-security-policy") == POLICY, (who, url)
        expect(page.locator(".swagger-ui .info")).to_be_visible()  # Swagger UI drew itself
        assert page.csp_violations == [], who

    # Signed out: the sign-in page and a missing page.
    context = browser.new_context(base_url=web.url, viewport=VIEWPORT)
    stranger_saw = watch_csp(context)
    page = context.new_page()
    for url, status in (("/login/", 200), ("/admin/login/", 200)):
        response = visit(page, url)
        assert (response.status, response.headers.get("content-security-policy")) == (status, POLICY), url
    context.close()
    assert stranger_saw == []


def admin_urls() -> list[str]:
    """The admin's index, each app's, and every registered model's list and first object."""
    urls = [reverse("admin:index"), reverse("admin:password_change"), reverse("admin:auth_user_add")]
    for model in admin.site._registry:
        meta = model._meta
        urls.append(reverse("admin:app_list", args=[meta.app_label]))
        urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
        first = model._default_manager.order_by("pk").first()
        if first is not None:
            urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[quote(first.pk)]))
    return sorted(set(urls))


def test_the_django_admin_runs_under_the_policy_without_a_violation(browser, web, acme):
    name = f"csp-admin-{secrets.token_hex(4)}"
    get_user_model().objects.create_superuser(name, f"{name}@example.com", PASSWORD)
    context = browser.new_context(base_url=web.url, viewport=VIEWPORT)
    context.set_default_timeout(30_000)
    saw = watch_csp(context)
    page = context.new_page()
    page.goto("/admin/login/")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", PASSWORD)
    with page.expect_navigation(timeout=EVENT_MS):
        page.locator("input[type=submit]").click()
    urls = admin_urls()
    assert len(urls) >= 15, urls
    for url in [*urls, "/admin/runtime/task/?q=t.steps", "/admin/runtime/auditevent/?tenant__exact=acme"]:
        response = visit(page, url)
        assert response.status == 200, url
        assert response.headers.get("content-security-policy") == POLICY, url
    # An admin action with its own page (templates/admin/grant_change.html), through the
    # admin's own script: tick the grant, choose the action, go.
    visit(page, reverse("admin:runtime_grant_changelist"))
    page.check(f"input[name=_selected_action][value='{acme.grant.id}']")
    page.select_option("select[name=action]", "revoke_grants")
    with page.expect_navigation(timeout=EVENT_MS):
        page.locator("button[name=index]").first.click()
    expect(page.get_by_role("heading", name="Revoke 1 grant?")).to_be_visible()
    settled(page)
    context.close()
    assert saw == []


def test_live_parts_work_under_the_policy_a_task_page_follows_its_task_to_the_end_and_stops_polling(
    person, fleet, acme
):
    """A sleeper runs, sleeps and finishes while its page watches, never reloaded; once
    it is finished the live part comes back without its trigger and polling ends."""
    fleet.supervisors(1)  # wakes the sleeper when its timer is due
    task_id = submit("t.sleeper", {"seconds": 2}).task_id
    wait_until(
        lambda: Task.objects.filter(id=task_id, status=states.SLEEPING).exists(),
        timeout=EVENT_S,
        message="the sleeper to sleep",
    )
    page = person("alice")
    page.goto(f"/tasks/{task_id}/")
    mark_page(page)
    expect(page.locator("#task-live")).to_have_attribute("hx-trigger", "every 2s")
    expect(page.locator("#task-status")).to_have_attribute("data-status", states.COMPLETED, timeout=EVENT_MS)
    expect(page.locator("#task-live")).not_to_have_attribute("hx-trigger", re.compile(".*"))
    assert still_same_page(page)

    page.goto("/")
    expect(page.locator("#chart-throughput .uplot")).to_have_count(1)  # uPlot drew, from its static file
    expect(page.locator("#chart-latency .uplot")).to_have_count(1)
    assert page.csp_violations == []


# Before any script of the page: a visibilityState the test turns; the polls console.js
# held back (it vetoes htmx:confirm, which window hears after it), those sent, and those
# still on their way.
HIDDEN_TAB = """
window.__hidden = false;
Object.defineProperty(document, "visibilityState", {configurable: true, get: () => window.__hidden ? "hidden" : "visible"});
window.__polls = {held: 0, sent: 0, open: 0};
window.addEventListener("htmx:confirm", (e) => { if (e.defaultPrevented) window.__polls.held += 1; });
window.addEventListener("htmx:beforeRequest", () => { window.__polls.sent += 1; window.__polls.open += 1; });
window.addEventListener("htmx:afterRequest", () => { window.__polls.open -= 1; });
"""


def test_the_task_list_polls_only_while_its_tab_is_visible(person, acme):
    page = person("alice")
    page.add_init_script(HIDDEN_TAB)
    page.goto("/tasks/")
    page.wait_for_function("() => window.__polls.sent >= 1", timeout=EVENT_MS)  # visible: it polls

    page.evaluate("window.__hidden = true")
    page.wait_for_function("() => window.__polls.held >= 1 && window.__polls.open === 0", timeout=EVENT_MS)
    sent = page.evaluate("window.__polls.sent")
    held = page.evaluate("window.__polls.held")
    submit("t.steps", {"n": 1})  # something new the list would announce
    page.wait_for_function("(held) => window.__polls.held >= held + 2", arg=held, timeout=EVENT_MS)
    assert page.evaluate("window.__polls.sent") == sent  # two ticks came and went: nothing asked
    expect(page.locator("#task-live .pill")).to_have_count(0)

    page.evaluate("window.__hidden = false")
    expect(page.locator("#task-live .pill")).to_contain_text("1 new", timeout=EVENT_MS)
    assert page.csp_violations == []


def test_the_tenant_switcher_submits_on_change_without_inline_script(person, people):
    Membership.objects.create(user=people.alice, tenant_id="globex", role=VIEWER)
    page = person("alice")
    page.goto("/tasks/")
    with page.expect_navigation(timeout=EVENT_MS):
        page.select_option("#tenant-select", "globex")
    expect(page.locator(".person .role")).to_have_text(VIEWER)
    expect(page.locator("#tenant-select")).to_have_value("globex")
    assert page.csp_violations == []
