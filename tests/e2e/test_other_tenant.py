"""Journey 5: carol, an operator of globex, gets 404 for every acme URL she tries, as a
page and as an htmx fragment, and her POSTs change nothing. The URLs come from the
console's own routes (django.urls), so a new route is tried the day it is added."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

from django.urls import URLPattern, URLResolver, get_resolver

from runtime import states
from runtime.models import AuditEvent, Effect, Task
from tests.e2e.stack import csrf_token

PARAM = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")
ACTIONS = re.compile(
    r"/(cancel|stop|reopen|resume|resolve|revoke|narrow|limits)/$"
)  # POST these, and they must 404 too
# Pools are fleet-wide, not a tenant's: carol is meant to see the same pools alice does.
# Agents are registered fleet-wide too; each tenant sees its own grants of them
# (tests/console/test_grant_screens.py checks carol sees none of acme's there).
SHARED = ("pools/", "agents/")


def console_routes() -> list[str]:
    """Every route of the site (django.urls) but the Django admin, the API and the
    credential gateway (each with its own tests: the gateway's tenant is the capability
    token's, never a session's; tests/console/gateway/ sends a tenant A token at tenant
    B), as Django's route strings: the console's, whoever's views serve them."""
    found = []

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            # The machine routes answer by their own credentials, never a session: the API
            # and the gateway have their own tenant tests, a webhook its signature's.
            if route.startswith(("admin/", "api/", "gateway/", "hooks/")):
                continue
            assert not route.startswith("^") and "(?P" not in route, f"{route}: a regex route; teach acme_url()"
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            else:
                assert isinstance(pattern, URLPattern)
                found.append(route)

    walk(get_resolver().url_patterns, "")
    return found


def acme_url(route: str, acme) -> str | None:
    """The route filled with acme's objects, or None for a route that names none."""
    names = [m.group("name") for m in PARAM.finditer(route)]
    if not names or route.startswith(SHARED):
        return None
    steps = any("seq" in name for name in names)

    def value(match) -> str:
        converter, name = match.group("converter"), match.group("name")
        if "stop" in name:
            return str(acme.stop.id)
        if "approval" in name:
            return str(acme.approval.id)
        if "schedule" in name:
            return str(acme.schedule.id)
        if "webhook" in name:
            return str(acme.webhook.id)
        if "decision" in name:
            return str(acme.decision.id)
        if "receipt" in name:
            return str(acme.erasure.id)
        if converter == "uuid" or "task" in name:
            return str(acme.done.id if steps else acme.blocked.id)
        if "seq" in name:
            return str(acme.seq)
        if "effect" in name or (route.startswith("effects/") and name in ("id", "pk")):
            return str(acme.effect.id)
        if "audit" in name or "event" in name or (route.startswith("audit/") and name in ("id", "pk")):
            return str(acme.event.id)
        if "token" in name or (route.startswith("tokens/") and name in ("id", "pk")):
            return str(acme.token.id)
        if "grant" in name:
            return str(acme.grant.id)
        if name == "username":  # a member of acme, and of no tenant of carol's
            return "bob"
        raise AssertionError(f"route {route!r}: which acme object is <{match.group(0)[1:-1]}>? teach acme_url()")

    return "/" + PARAM.sub(value, route)


def test_carol_gets_404_for_every_acme_url_as_a_page_and_as_an_htmx_fragment(person, acme):
    routes = console_routes()
    urls = sorted(filter(None, (acme_url(route, acme) for route in routes)))
    # The contract's object routes at least: a console without them is not the console.
    for expected in (
        f"/tasks/{acme.blocked.id}/",
        f"/tasks/{acme.blocked.id}/cancel/",
        f"/tasks/{acme.blocked.id}/resume/",
        f"/tasks/{acme.blocked.id}/steps/",
        f"/tasks/{acme.done.id}/steps/{acme.seq}/",
        f"/effects/{acme.effect.id}/",
        f"/effects/{acme.effect.id}/resolve/",
        f"/audit/{acme.event.id}/",
        f"/tokens/{acme.token.id}/revoke/",
        f"/grants/{acme.grant.id}/revoke/",
    ):
        assert expected in urls, f"{expected} is not among the console's routes: {routes}"

    alice = person("alice")
    carol = person("carol")
    carol.goto("/tasks/")
    token = csrf_token(carol)
    answers, post_only = {}, set()
    for url in urls:
        # Each URL is real: its owner's tenant is not refused (nor does it fail). A route
        # that serves no GET answers 405 to anyone, whatever the id: that tells nothing.
        seen = alice.request.get(url, max_redirects=0)
        assert seen.status != 404 and seen.status < 500, f"alice gets {seen.status} for her own {url}"
        if seen.status == 405:
            post_only.add(url)
        for htmx in (False, True):
            headers = {"HX-Request": "true"} if htmx else {}
            answers[("GET", url, htmx)] = carol.request.get(url, headers=headers, max_redirects=0).status
            posted = carol.request.post(
                url,
                form={
                    "csrfmiddlewaretoken": token,
                    "reason": "carol tries",
                    "outcome": states.COMMITTED,
                    "receipt": "{}",
                },
                headers={"X-CSRFToken": token, **headers},
                max_redirects=0,
            )
            answers[("POST", url, htmx)] = posted.status

    def told_nothing(method: str, url: str, status: int) -> bool:
        if status == 404:
            return True
        if status == 405:  # the method is not served here, for any id: GETs alice gets 405 for too,
            # and POSTs to a route that is no action; an action must look the object up and 404
            return url in post_only if method == "GET" else not ACTIONS.search(url)
        return False

    wrong = {key: status for key, status in answers.items() if not told_nothing(key[0], key[1], status)}
    assert wrong == {}, "carol is not told 404 for these acme URLs"

    # Switching to acme is not found either, and her lists never show acme's rows.
    refused = carol.request.post(
        "/tenant/",
        form={"csrfmiddlewaretoken": token, "tenant": "acme"},
        headers={"X-CSRFToken": token},
        max_redirects=0,
    )
    assert refused.status == 404
    # Every route that names no object (the lists, the live fragments, the export), as it
    # is and filtered on acme's objects: never a row of acme's. A filter naming acme's
    # task is the 404 of that task's own page (docs/api.md, Pagination: one rule).
    plain = ["/" + route for route in routes if not PARAM.search(route) and route not in ("logout/",)]
    filtered = [
        f"/tasks/?root={acme.done.id}",
        f"/tasks/?parent={acme.done.id}",
        f"/effects/?task={acme.blocked.id}",
        f"/audit/?task={acme.blocked.id}",
        f"/audit/export.jsonl?task={acme.blocked.id}",
    ]
    for url in plain + filtered:
        for headers in ({}, {"HX-Request": "true"}):
            response = carol.request.get(url, headers=headers, max_redirects=0)
            assert response.status < 500, f"{url} {headers}: {response.status}"
            if url in filtered:
                assert response.status == 404, f"{url} {headers}: {response.status}"
            body = response.text()
            for row in (
                f'id="task-{acme.blocked.id}"',
                f'id="task-{acme.done.id}"',
                f'id="effect-{acme.effect.id}"',
                f'id="audit-{acme.event.id}"',
            ):
                assert row not in body, f"carol's {url} {headers} shows acme's row {row}"
            echoed = body
            for value in parse_qs(urlparse(url).query).values():  # her own filter, shown back to her
                echoed = echoed.replace(value[0], "")
            for secret in (str(acme.blocked.id), str(acme.done.id), acme.effect.key, acme.token.prefix):
                assert secret not in echoed, f"carol's {url} {headers} shows acme's {secret}"
            if "export.jsonl" in url and response.status == 200:
                assert body.strip() == "", f"carol's export of an acme task holds events: {body[:300]}"

    # Her POSTs changed nothing, and she left no trace in acme's trail.
    assert Task.objects.get(id=acme.blocked.id).status == states.BLOCKED
    assert Effect.objects.get(id=acme.effect.id).state == states.UNKNOWN
    acme.token.refresh_from_db()
    assert acme.token.revoked_at is None
    assert not AuditEvent.objects.filter(tenant="acme", actor="user:carol").exists()
