"""What the browser journeys run against: the console served over real HTTP by its own
process, and small helpers that act as a person in Chromium would (sign in, read a
CSRF token off a page, photograph a screen).

The web server is uvicorn over console.asgi, as `make run` and docs/deploy.md serve it
(debug serves the static files), in the test database the workers and the supervisor
use (tests/conftest.py child_env).
"""

from __future__ import annotations

import contextlib
import json
import socket
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from playwright.sync_api import BrowserContext, Page

from console.dev.web import web_command
from tests.harness import REPO, Process, wait_until
from tests.people import PASSWORD

CHROMIUM = Path("/usr/bin/chromium")
INSTALL_HINT = (
    "the browser journeys need Debian's chromium at /usr/bin/chromium: "
    "apt-get update && apt-get install -y --no-install-recommends chromium "
    "(never `playwright install`: the tests drive the system browser)"
)
SCREENSHOTS = REPO / "docs" / "screenshots"
VIEWPORT = {"width": 1280, "height": 800}
# Generous on a loaded two-core machine: each wait ends as soon as its event happens.
EVENT_MS = 60_000
EVENT_S = EVENT_MS / 1000

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# Each page of a context reports its Content-Security-Policy violations to Python as they
# happen (a binding survives navigations, where state kept in the page would not).
_CSP_WATCH = """
document.addEventListener("securitypolicyviolation", (e) => window.__stewardCspViolation(
  `${location.pathname}${location.search}: ${e.effectiveDirective} refused ${e.blockedURI || "inline"}` +
  ` at ${e.sourceFile || "the page"}:${e.lineNumber} ${e.sample}`), true);
"""


def watch_csp(context: BrowserContext) -> list[str]:
    """Every Content-Security-Policy violation in any page of `context`, as the page's
    securitypolicyviolation event and as Chromium's console error (either alone would
    do; both, so neither a missed event nor a reworded message hides one)."""
    seen: list[str] = []
    context.expose_binding("__stewardCspViolation", lambda source, text: seen.append(text))
    context.add_init_script(_CSP_WATCH)
    context.on("console", lambda m: seen.append(f"console: {m.text}") if "Content Security Policy" in m.text else None)
    return seen


def settled(page: Page) -> None:
    """Return once the page has had one more turn of its event loop: a violation its
    loading queued has been reported by then."""
    page.evaluate("() => new Promise((done) => setTimeout(done, 0))")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class WebServer(Process):
    """The console, the API and the credential gateway on a loopback port, as `make run`
    serves them."""

    def __init__(self, env: dict):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # The tests' DJANGO_ALLOW_ASYNC_UNSAFE (tests/e2e/conftest.py, for Playwright) is
        # not passed on: the server keeps Django's guard against database work on its
        # event loop.
        env = {k: v for k, v in env.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
        super().__init__("web", web_command(self.port), env)

    def wait_ready(self, timeout: float = EVENT_S) -> WebServer:
        def answers():
            if not self.alive():
                raise AssertionError(f"the web server exited:\n{self.output()[-3000:]}")
            try:
                with _NO_PROXY.open(self.url + "/login/", timeout=2) as response:
                    return response.status
            except urllib.error.HTTPError as exc:  # it answers: that is all we wait for
                return exc.code
            except OSError:
                return None

        wait_until(answers, timeout=timeout, interval=0.1, message="the web server to answer /login/")
        return self


@contextlib.contextmanager
def serving(env: dict):
    """A WebServer in `env`, answering, until the block ends."""
    server = WebServer(env).start()
    try:
        yield server.wait_ready()
    finally:
        server.stop()


def login(page: Page, username: str, *, shoot: str | None = None) -> Page:
    """Sign in through the login form, as a person would (the context's base_url is the
    web server), and land wherever the console sends a signed-in person. `shoot` names
    the screenshot of the filled form."""
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    if shoot:
        screenshot(page, shoot)
    with page.expect_navigation(timeout=EVENT_MS):
        page.get_by_role("button", name="Sign in").click()
    assert "/login/" not in urlparse(page.url).path, (
        f"{username} was not signed in; the page says: {page.inner_text('body')[:500]}"
    )
    return page


def csrf_token(page: Page) -> str:
    """The CSRF token the current page carries: in a form, or in `hx-headers` on <body>
    (CONVENTIONS 12), as a script a person runs in the devtools would find it."""
    field = page.locator("input[name=csrfmiddlewaretoken]")
    if field.count():
        return field.first.get_attribute("value")
    headers = page.locator("body").get_attribute("hx-headers") or "{}"
    token = json.loads(headers).get("X-CSRFToken")
    assert token, f"no CSRF token on {page.url}: neither a csrfmiddlewaretoken field nor body hx-headers"
    return token


def mark_page(page: Page) -> None:
    """Set a marker a navigation or a reload would wipe (see still_same_page)."""
    page.evaluate("window.__steward_marker = 1")


def still_same_page(page: Page) -> bool:
    return page.evaluate("window.__steward_marker === 1")


def screenshot(page: Page, screen: str) -> Path:
    """docs/screenshots/<screen>.png at 1280x800, the whole page, overwriting."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{screen}.png"
    page.set_viewport_size(VIEWPORT)
    page.screenshot(path=str(path), full_page=True)
    return path
