"""A crawl as alice: from the dashboard, every internal `<a href>` on every page reached,
breadth first, answers 200. The world holds what an operator follows links between: an
unknown effect whose step was never journaled (the attempt died before the step row), an
effect of a journaled step, a pending approval, a grant narrowed, decisions allowed and
denied, a task blocked by a denial, a stop, a schedule, a webhook and their audit events.
A dead link (a 404 from a page's own link) fails it, with the page that showed it."""

from __future__ import annotations

import re
from collections import deque
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest

from runtime import states
from runtime.authz.services import authorize, grant_create, grant_narrow
from runtime.models import Effect, Task
from runtime.stops.services import task_stop
from runtime.triggers.services import schedule_create, webhook_create
from tests.console.world import World, attempt, submit

PAGES_MAX = 1500  # the bound: a world this size has far fewer distinct links
SKIPPED = ("/logout/", "/admin/", "/static/", "/api/")  # a POST, the Django admin, files, the API


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            href = dict(attrs).get("href")
            if href is not None:
                self.hrefs.append(href)


def links_of(url: str, html: str) -> list[str]:
    parser = Links()
    parser.feed(html)
    found = []
    for href in parser.hrefs:
        absolute, _ = urldefrag(urljoin(url, href))
        parts = urlsplit(absolute)
        if parts.scheme not in ("", "http") or parts.netloc not in ("", "testserver"):
            continue  # outside the console
        local = parts.path + (f"?{parts.query}" if parts.query else "")
        if local and not local.startswith(SKIPPED):
            found.append(local)
    return found


def crawl(client, start: str = "/") -> tuple[dict[str, int], dict[str, str]]:
    """Every URL reached from `start` with its status, and the page each was first seen on."""
    seen_on: dict[str, str] = {start: "(start)"}
    status: dict[str, int] = {}
    queue = deque([start])
    while queue and len(status) < PAGES_MAX:
        url = queue.popleft()
        response = client.get(url)
        status[url] = response.status_code
        kind = response.get("Content-Type", "")
        if response.status_code != 200 or not kind.startswith("text/html"):
            continue
        for link in links_of(url, response.content.decode()):
            if link not in seen_on:
                seen_on[link] = url
                queue.append(link)
    return status, seen_on


@pytest.fixture
def linked(world: World):
    """The console world, with every kind of object an operator follows links to."""
    # An effect of a journaled step (the parent's #1), committed, beside the blocked
    # task's unknown effect at a step that was never journaled.
    Effect.objects.create(
        key=f"{world.parent.id}/1/send",
        task=world.parent,
        tenant="acme",
        step_seq=1,
        name="send",
        effect_class=states.IRREVERSIBLE,
        keyed=True,
        state=states.COMMITTED,
        request_digest="ab" * 32,
        attempt=world.parent.attempts.first(),
        epoch=1,
        sends=1,
        receipt={"ref": "r-1"},
    )
    grant = grant_create(
        tenant="acme", principal="agent:t.steps", action="tool.search", resource="repo:acme/*", actor="user:dave"
    )
    grant_narrow(grant_id=grant.id, tenant="acme", resource="repo:acme/public/*", actor="user:alice", reason="narrower")
    authorize(task=world.parent.id, action="tool.search", resource="repo:acme/public/x", boundary="worker")
    denied = submit("acme", "alice", n=1)
    attempt(denied, ended=True)
    decision = authorize(task=denied.id, action="model.chat", resource="gpt", boundary="credential_gateway")
    assert not decision.allowed
    Task.objects.filter(id=denied.id).update(
        status=states.BLOCKED, blocked_reason=states.AUTHORITY_DENIED, blocked_decision=decision
    )
    stopped = submit("acme", "alice", n=9)
    task_stop(task_id=stopped.id, actor="user:alice", reason="a stop to follow")
    schedule_create(
        tenant="acme",
        name="nightly",
        agent="t.steps",
        input={},
        owner="user:alice",
        cron="0 3 * * *",
        actor="user:alice",
    )
    webhook_create(tenant="acme", name="gh", agent="t.steps", owner="user:alice", actor="user:alice")
    return world


def test_every_internal_link_alice_can_follow_answers_200(linked, as_person):
    client = as_person(linked.people.alice)

    status, seen_on = crawl(client)

    dead = {url: (code, seen_on[url]) for url, code in status.items() if code != 200}
    assert not dead, "links that do not answer 200 (url: (status, the page that links it)):\n" + "\n".join(
        f"  {url}: {found}" for url, found in sorted(dead.items())
    )
    assert len(status) < PAGES_MAX, "the crawl hit its bound: the world links more than it should"
    # The crawl reached a page of each kind, so "every link answers 200" says something.
    shapes = {
        "task": r"/tasks/[0-9a-f-]{36}/",
        "step": r"/tasks/[0-9a-f-]{36}/steps/[0-9]+/",
        "effect": r"/effects/[0-9]+/",
        "grant": r"/grants/[0-9]+/",
        "approval": r"/approvals/[0-9a-f-]{36}/",
        "decision": r"/decisions/[0-9a-f-]{36}/",
        "audit event": r"/audit/[0-9]+/",
        "stop": r"/stops/[0-9a-f-]{36}/",
        "schedule": r"/schedules/[0-9a-f-]{36}/",
        "webhook": r"/webhooks/[0-9a-f-]{36}/",
    }
    for kind, shape in shapes.items():
        assert any(re.fullmatch(shape, url) for url in status), f"no {kind} page was reached"
    assert f"/effects/{linked.effect.id}/" in status
    assert f"/approvals/{linked.approval.id}/" in status
    # The unknown effect's step was never journaled: it is named, never linked.
    assert not any(url.startswith(f"/tasks/{linked.blocked.id}/steps/0") for url in status)


def test_an_effect_whose_step_was_never_journaled_says_so_and_links_its_task(linked, as_person):
    client = as_person(linked.people.alice)
    blocked, effect = linked.blocked, linked.effect

    for url in ("/effects/", f"/effects/{effect.id}/", f"/tasks/{blocked.id}/"):
        html = client.get(url).content.decode()
        assert f"/tasks/{blocked.id}/steps/0/" not in html, url
        assert "not journaled" in html, url
        assert f"/tasks/{blocked.id}/#attempts" in html, url
    # A journaled step is a link: the parent's committed effect at #1.
    html = client.get(f"/tasks/{linked.parent.id}/").content.decode()
    assert f'href="/tasks/{linked.parent.id}/steps/1/"' in html
