"""The browser journeys' stack: a real web server process serving the console over HTTP,
real Celery workers and a supervisor (tests/harness.py), all in pytest-django's test
database, with Chromium (Debian's, headless) driven by Playwright.

The web server and the browser live for the session; each test gets fresh people,
fresh browser contexts (one per person), and the workers it starts itself.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from console.dev.demo.fake_model import FakeModel
from console.dev.demo.fake_service import FakeService
from console.models import OPERATOR
from tests.e2e.acme import acme  # noqa: F401 - a fixture: one of everything in acme
from tests.e2e.stack import CHROMIUM, INSTALL_HINT, VIEWPORT, login, serving, watch_csp
from tests.people import make_people

# Playwright's sync API runs its event loop on this thread (in a greenlet), so Django
# would take every ORM call the test makes between two browser calls for one made from
# async code. The test's own queries are plain synchronous ones.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

E2E = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    """Every journey needs the real processes: `make test` and `make test-integration` both run them."""
    for item in items:
        if E2E in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def results_service():
    """The outside service research.batch submits its results to (keyed: it deduplicates)."""
    with FakeService(mode="keyed") as service:
        yield service


@pytest.fixture(scope="session")
def child_env(child_env, results_service) -> dict:
    """Workers and the web server alike: research.batch's default results URL is ours
    (the form shows the schema's default; the worker validates with its own)."""
    return {**child_env, "STEWARD_DEMO_RESULTS_URL": results_service.url}


# The model provider's key: only this module, the web process and the fake model hold it.
MODEL_KEY = f"sk-e2e-{os.getpid()}-model"


@pytest.fixture(scope="session")
def fake_model():
    """The model provider behind the web process's credential gateway (loopback HTTP)."""
    with FakeModel(key=MODEL_KEY) as model:
        yield model


@pytest.fixture(scope="session")
def web(child_env, fake_model):
    """uvicorn (tests/e2e/stack.py WebServer) on a free loopback port, in the test database,
    with the credential gateway pointed at the fake model."""
    env = {
        **child_env,
        "STEWARD_DEBUG": "1",
        "STEWARD_DB_POOL_MAX": "8",
        "PYTHONUNBUFFERED": "1",
        "STEWARD_MODEL_URL": fake_model.url,
        "STEWARD_MODEL_KEY": MODEL_KEY,
    }
    with serving(env) as server:
        yield server


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium, headless. Missing, the journeys FAIL: a skipped journey would
    let CI pass without ever opening the console."""
    if not CHROMIUM.exists():
        pytest.fail(INSTALL_HINT, pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True)
        yield launched
        launched.close()


@pytest.fixture
def people(live):
    """alice (operator, acme), bob (viewer, acme), carol (operator, globex), committed."""
    return make_people()


@pytest.fixture
def person(browser, web, people):
    """person("alice"): a signed-in page in a browser context of that person's own (its
    own cookies), at 1280x800; every context is closed when the test ends. Every journey
    runs under the console's Content-Security-Policy: one it violated, anywhere, fails
    (page.csp_violations lists them as they come)."""
    contexts = []

    def open_as(username: str, *, shoot: str | None = None):
        context = browser.new_context(base_url=web.url, viewport=VIEWPORT, accept_downloads=True)
        context.set_default_timeout(30_000)
        violations = watch_csp(context)
        contexts.append((context, violations))
        page = context.new_page()
        page.csp_violations = violations
        page.on("dialog", lambda dialog: dialog.accept())  # a confirm() before an action: yes
        return login(page, username, shoot=shoot)

    yield open_as
    for context, _ in contexts:
        context.close()
    violated = [v for _, violations in contexts for v in violations]
    assert violated == [], f"the Content-Security-Policy was violated: {violated}"


@pytest.fixture
def alice_principal(people):
    """alice acting in acme, for setting up objects through the services as she would."""
    from console.access import Principal
    from console.models import OPERATE

    return Principal(
        user=people.alice,
        tenant="acme",
        role=OPERATOR,
        channel="console",
        scope=OPERATE,
        credential="session:e2e-setup",
    )
