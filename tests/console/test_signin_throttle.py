"""Sign-in throttling over HTTP (issue 17): past STEWARD_SIGNIN_FAILURE_LIMIT failed
sign-ins for one account, or from one client address, the right password is refused too,
with the lockout message on the page and 429 Too Many Requests, until the cool-off ends;
each lockout is one `signin.locked_out` audit event, even when the failures race; API
tokens and open sessions keep working. The browser journey is tests/e2e/test_signin_lockout.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import F
from django.test import Client, RequestFactory

from console.access import Principal, token_create
from console.models import OPERATE, OPERATOR
from console.signin import LOCKED_OUT, client_address, lockout_message
from runtime.models import AuditEvent
from tests.harness import REPO, race
from tests.people import PASSWORD, make_people

LIMIT = settings.AXES_FAILURE_LIMIT
COOL_OFF = int(settings.AXES_COOLOFF_TIME.total_seconds())
LOCKED_TEXT = b"Too many failed sign-ins for this account or from this address"


def sign_in(client, username: str, password: str, *, address: str = "198.51.100.1", path: str = "/login/"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address)


def lockouts() -> dict[str, int]:
    """The lockout events, counted by what they are about ("account:alice", "address:...")."""
    counted = {}
    for event in AuditEvent.objects.filter(kind=LOCKED_OUT):
        counted[event.data["about"]] = counted.get(event.data["about"], 0) + 1
    return counted


def locked(response) -> bool:
    return response.status_code == 429 and LOCKED_TEXT in response.content


@pytest.fixture
def people(db):
    return make_people()


def test_after_the_limit_even_the_right_password_is_refused_with_a_clear_message(people, client):
    for _ in range(LIMIT - 1):
        wrong = sign_in(client, "alice", "nope")
        assert wrong.status_code == 200 and b"do not match" in wrong.content
    last = sign_in(client, "alice", "nope")  # the failure that sets the lock says so already
    assert locked(last) and last["Retry-After"] == str(COOL_OFF)
    assert lockout_message().encode() in last.content and b'name="password"' in last.content
    right = sign_in(client, "alice", PASSWORD)
    assert locked(right), (right.status_code, right.content[:300])
    assert client.get("/").status_code == 302  # not signed in
    assert "_auth_user_id" not in client.session
    # One event for the account and one for the address: both reached the limit.
    assert lockouts() == {"account:alice": 1, "address:198.51.100.1": 1}
    event = AuditEvent.objects.get(kind=LOCKED_OUT, data__about="account:alice")
    assert (event.tenant, event.actor) == ("system", "client:198.51.100.1")
    assert {k: event.data[k] for k in ("locked", "person", "address", "failures", "limit", "cool_off_seconds")} == {
        "locked": "account",
        "person": "alice",
        "address": "198.51.100.1",
        "failures": LIMIT,
        "limit": LIMIT,
        "cool_off_seconds": COOL_OFF,
    }


def test_an_account_is_locked_from_every_address_and_others_are_not(people, client):
    for i in range(LIMIT):
        sign_in(client, "alice", "nope", address=f"203.0.113.{i + 1}")
    assert locked(sign_in(client, "alice", PASSWORD, address="203.0.113.200"))
    assert lockouts() == {"account:alice": 1}
    # bob, from an address that tried alice's account, is not locked out.
    assert sign_in(Client(), "bob", PASSWORD, address="203.0.113.1").status_code == 302


def test_an_address_is_locked_for_every_account_including_names_nobody_has(people, client):
    for name in ["alice", "root", "admin", "nobody-at-all", "bob"][:LIMIT]:
        sign_in(client, name, "nope", address="192.0.2.9")
    assert locked(sign_in(Client(), "dave", PASSWORD, address="192.0.2.9"))
    assert sign_in(Client(), "dave", PASSWORD, address="192.0.2.10").status_code == 302
    assert lockouts() == {"address:192.0.2.9": 1}


def test_a_name_nobody_has_is_locked_like_a_real_one(people, client):
    """The answers for a name that does not exist are the same as for one that does: the
    throttle tells a guesser nothing about who has an account."""
    answers = {}
    for name in ("alice", "zz-no-such-person"):
        answers[name] = [sign_in(Client(), name, "nope", address=f"192.0.2.{20 + i}") for i in range(LIMIT + 1)]
    shape = {name: [(r.status_code, LOCKED_TEXT in r.content) for r in got] for name, got in answers.items()}
    assert shape["alice"] == shape["zz-no-such-person"]
    assert lockouts() == {"account:alice": 1, "account:zz-no-such-person": 1}


def test_refused_attempts_do_not_extend_the_lock_and_it_ends_after_the_cool_off(people, client):
    for _ in range(LIMIT):
        sign_in(client, "alice", "nope")
    for _ in range(10):  # a guesser hammering a locked account
        assert locked(sign_in(client, "alice", "nope"))
    counted = sum(AccessAttempt.objects.filter(username="alice").values_list("failures_since_start", flat=True))
    assert counted == LIMIT, "an attempt refused while locked was counted (it would extend the lock)"
    assert lockouts() == {"account:alice": 1, "address:198.51.100.1": 1}, "one event per lockout, not per refusal"
    # The cool-off passes (the failures' time moves back by it, as the clock would move on).
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(seconds=COOL_OFF + 1))
    assert sign_in(client, "alice", PASSWORD).status_code == 302


def test_the_admin_sign_in_is_throttled_with_the_same_counts(people, client):
    dave = people.dave
    dave.is_staff = True
    dave.save()
    for _ in range(LIMIT - 1):
        sign_in(client, "dave", "nope", path="/admin/login/")
    assert locked(sign_in(client, "dave", "nope"))  # the console's form counts toward the same lock
    refused = sign_in(client, "dave", PASSWORD, path="/admin/login/")
    assert locked(refused) and b'id="login-form"' in refused.content
    assert "_auth_user_id" not in client.session


def test_api_tokens_and_open_sessions_keep_working_during_a_lockout(people, client):
    principal = Principal(
        user=people.alice, tenant="acme", role=OPERATOR, channel="console", scope=OPERATE, credential="t"
    )
    secret = token_create(principal=principal, name="ci", scope=OPERATE).secret
    session = Client()
    session.force_login(people.alice)
    for _ in range(LIMIT + 2):
        sign_in(client, "alice", "nope", address="127.0.0.1")
    assert locked(sign_in(client, "alice", PASSWORD, address="127.0.0.1"))
    api = Client().get("/api/v1/tasks", headers={"Authorization": f"Bearer {secret}"}, REMOTE_ADDR="127.0.0.1")
    assert api.status_code == 200, api.content[:300]
    assert session.get("/tasks/", REMOTE_ADDR="127.0.0.1").status_code == 200


@pytest.mark.parametrize(
    "header, proxies, sent, peer, address",
    [
        # No trusted header: the peer, whatever the client claims.
        ("", 1, "10.9.9.9", "198.51.100.7", "198.51.100.7"),
        ("", 1, None, "198.51.100.7", "198.51.100.7"),
        # Behind one proxy that appends: the right-most entry; what the client put left of it is ignored.
        ("HTTP_X_FORWARDED_FOR", 1, "10.9.9.9, 203.0.113.5", "10.0.0.2", "203.0.113.5"),
        ("HTTP_X_FORWARDED_FOR", 1, "203.0.113.5", "10.0.0.2", "203.0.113.5"),
        # Behind two: the second from the right (what the outer proxy saw).
        ("HTTP_X_FORWARDED_FOR", 2, "10.9.9.9, 203.0.113.5, 10.0.0.3", "10.0.0.2", "203.0.113.5"),
        # Missing, too short, or garbled where the proxy writes: the peer (the proxy), never a fresh address.
        ("HTTP_X_FORWARDED_FOR", 1, None, "10.0.0.2", "10.0.0.2"),
        ("HTTP_X_FORWARDED_FOR", 2, "203.0.113.5", "10.0.0.2", "10.0.0.2"),
        ("HTTP_X_FORWARDED_FOR", 1, "10.9.9.9, not-an-address", "10.0.0.2", "10.0.0.2"),
        ("HTTP_X_FORWARDED_FOR", 1, "203.0.113.5:4711", "10.0.0.2", "10.0.0.2"),
        ("HTTP_X_REAL_IP", 1, "2001:DB8::1", "10.0.0.2", "2001:db8::1"),
        # A peer that is no address (a unix socket) and no header: none (all such share one count).
        ("", 1, None, "", None),
    ],
)
def test_the_client_address_comes_from_the_peer_or_only_the_trusted_header(
    settings, header, proxies, sent, peer, address
):
    settings.STEWARD_CLIENT_IP_HEADER, settings.STEWARD_CLIENT_IP_PROXIES = header, proxies
    extra = {"REMOTE_ADDR": peer}
    if sent is not None:
        extra[header or "HTTP_X_FORWARDED_FOR"] = sent
    assert client_address(RequestFactory().post("/login/", **extra)) == address


def test_a_forged_forwarded_header_does_not_escape_the_address_lock(people, client, settings):
    settings.STEWARD_CLIENT_IP_HEADER, settings.STEWARD_CLIENT_IP_PROXIES = "HTTP_X_FORWARDED_FOR", 1
    for i in range(LIMIT):  # each guess claims another address left of what the proxy appended
        client.post(
            "/login/",
            {"username": f"guess-{i}", "password": "nope"},
            HTTP_X_FORWARDED_FOR=f"10.1.1.{i}, 203.0.113.66",
            REMOTE_ADDR="10.0.0.2",
        )
    refused = client.post(
        "/login/", {"username": "bob", "password": PASSWORD}, HTTP_X_FORWARDED_FOR="10.7.7.7, 203.0.113.66"
    )
    assert locked(refused) and lockouts() == {"address:203.0.113.66": 1}


@pytest.mark.parametrize(
    "name, value, says",
    [
        ("STEWARD_SIGNIN_FAILURE_LIMIT", "five", "is not an integer"),
        ("STEWARD_SIGNIN_FAILURE_LIMIT", "0", "must be at least 1"),
        ("STEWARD_SIGNIN_COOLOFF_SECONDS", "15m", "is not an integer"),
        ("STEWARD_SIGNIN_COOLOFF_SECONDS", "0", "must be at least 1"),
        ("STEWARD_CLIENT_IP_HEADER", "X-Forwarded-For: 1.2.3.4", "is not a header name"),
        ("STEWARD_CLIENT_IP_PROXIES", "0", "must be at least 1"),
    ],
)
def test_a_malformed_throttle_setting_stops_start_up_naming_it(name, value, says):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=REPO,
        env={**env, "DJANGO_SETTINGS_MODULE": "console.settings", name: value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode != 0 and name in started.stderr and says in started.stderr, started.stderr[-500:]


# --- racing to the limit -------------------------------------------------------------------

RACERS = LIMIT * 3
TRIALS = [pytest.param(5, id="5-trials"), pytest.param(60, id="60-trials", marks=pytest.mark.stress)]


def race_wrong_passwords(username: str, address: str) -> list[str]:
    """RACERS wrong sign-ins for `username` from `address` at once (tests/harness.py race:
    a barrier, each on its own client and database connection): each answer, "wrong" (the
    form's wrong password) or "locked" (429 with the lockout message)."""

    def one(_):
        response = sign_in(Client(), username, "nope", address=address)
        return "locked" if locked(response) else "wrong" if response.status_code == 200 else "other"

    return [outcome if isinstance(outcome, str) else repr(outcome) for outcome in race(RACERS, one)]


@pytest.mark.parametrize("trials", TRIALS)
def test_failures_racing_to_the_limit_still_lock_out_once(transactional_db, settings, trials):
    """Every failure counted at once can pass the lock's check before any is recorded: the
    lock must still hold afterwards, at most LIMIT - 1 of them may be told "wrong password"
    (each of the others saw the count at the limit), and the lockout is one event per
    account and per address however many requests reached it together."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_people()
    tally = {"wrong": 0, "locked": 0}
    for trial in range(trials):
        username, address = f"racer-{trial}", f"10.20.{trial // 250}.{trial % 250 + 1}"
        get_user_model().objects.create_user(username, password=PASSWORD)
        outcomes = race_wrong_passwords(username, address)
        assert set(outcomes) <= {"wrong", "locked"}, outcomes
        for outcome in outcomes:
            tally[outcome] += 1
        assert outcomes.count("wrong") <= LIMIT - 1, f"trial {trial}: {outcomes}"
        assert locked(sign_in(Client(), username, PASSWORD, address="10.99.0.1")), f"trial {trial}: not locked"
        counted = lockouts()
        assert counted.get(f"account:{username}") == 1, f"trial {trial}: {counted}"
        assert counted.get(f"address:{address}") == 1, f"trial {trial}: {counted}"
    print(f"\n{trials} trials x {RACERS} racing wrong sign-ins (limit {LIMIT}): {tally}")
    assert tally["locked"] >= trials * (RACERS - LIMIT + 1)
