"""audit_record_once: an event about a lasting condition (a sign-in lockout) is recorded once
per period per subject, even by callers racing each other (each in its own transaction,
as web requests are), and again once the period has passed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runtime.errors import StewardError
from runtime.models import AuditEvent
from runtime.trail.services import audit_record_once
from tests.harness import race, wait_until

HOUR = timedelta(hours=1)


def once(about: str, *, tenant: str = "system", kind: str = "signin.locked_out", within=HOUR):
    return audit_record_once(
        actor="client:192.0.2.1", tenant=tenant, kind=kind, about=about, within=within, data={"failures": 5}
    )


def test_the_first_call_records_and_the_next_within_the_period_do_not(db):
    first = once("account:alice")
    assert isinstance(first, int) and once("account:alice") is None and once("account:alice") is None
    event = AuditEvent.objects.get(id=first)
    assert (event.tenant, event.kind, event.actor) == ("system", "signin.locked_out", "client:192.0.2.1")
    assert event.data == {"failures": 5, "about": "account:alice"}
    # Another subject, another kind or another tenant is another event.
    assert once("account:bob") and once("account:alice", kind="signin.other") and once("account:alice", tenant="acme")
    assert AuditEvent.objects.filter(data__about="account:alice").count() == 3


def test_once_the_period_has_passed_it_records_again(transactional_db):
    period = timedelta(milliseconds=200)
    assert once("address:192.0.2.1", within=period) is not None
    # Each call its own transaction (the event's time is its transaction's start): wait for
    # the clock to pass the period, no longer.
    again = wait_until(lambda: once("address:192.0.2.1", within=period), timeout=10, interval=0.05)
    assert AuditEvent.objects.filter(data__about="address:192.0.2.1").count() == 2 and again


@pytest.mark.parametrize(
    "kwargs",
    [
        {"actor": ""},
        {"tenant": "x" * 101},
        {"about": "a\x00b"},
        {"about": "x" * 301},
    ],
)
def test_bad_arguments_are_refused_writing_nothing(db, kwargs):
    args = {"actor": "client:1", "tenant": "system", "kind": "k", "about": "a", "within": HOUR, **kwargs}
    with pytest.raises(StewardError):
        audit_record_once(**args)
    assert not AuditEvent.objects.filter(kind="k").exists()


@pytest.mark.parametrize("within", [timedelta(0), timedelta(seconds=-1), 60])
def test_a_period_that_is_not_a_positive_duration_is_a_programming_error(db, within):
    with pytest.raises(TypeError):
        audit_record_once(actor="client:1", tenant="system", kind="k", about="a", within=within)


TRIALS = [pytest.param(10, id="10-trials"), pytest.param(100, id="100-trials", marks=pytest.mark.stress)]


@pytest.mark.parametrize("trials", TRIALS)
def test_callers_racing_on_one_subject_write_one_event(transactional_db, trials):
    written = []
    for trial in range(trials):
        made = race(8, lambda _: once(f"account:racer-{trial}"))
        assert not [m for m in made if isinstance(m, Exception)], made
        written.append(sum(1 for m in made if m is not None))
    assert written == [1] * trials
