"""Two admins demoting (or removing) each other at the same moment: the tenant row's lock
serializes them, so exactly one wins and the other is refused LAST_ADMIN; counted over
many trials. Without the lock both would see the other still an admin, and acme would
be left with none."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from console.access import Principal, member_remove, member_set_role
from console.models import ADMIN, OPERATE, OPERATOR, Membership
from runtime.errors import StewardError
from tests.people import make_people

TRIALS = 20


def admin(user) -> Principal:
    return Principal(user=user, tenant="acme", role=ADMIN, channel="console", scope=OPERATE, credential="test:race")


def race(*calls) -> list[str]:
    barrier, outcomes = threading.Barrier(len(calls)), []

    def run(call):
        try:
            barrier.wait()
            call()
            outcomes.append("won")
        except StewardError as exc:
            outcomes.append(exc.code)
        finally:
            connection.close()  # each thread's own connection

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(outcomes)


@pytest.mark.parametrize("how", ["demote", "remove"])
def test_two_admins_acting_on_each_other_at_once_leave_one_admin(transactional_db, settings, how):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    people = make_people()
    tally = {}
    for _ in range(TRIALS):
        for user in (people.alice, people.dave):  # both admins again (a removal deleted one)
            Membership.objects.update_or_create(user=user, tenant_id="acme", defaults={"role": ADMIN})
        if how == "demote":
            calls = [
                lambda: member_set_role(principal=admin(people.dave), username="alice", role=OPERATOR),
                lambda: member_set_role(principal=admin(people.alice), username="dave", role=OPERATOR),
            ]
        else:
            calls = [
                lambda: member_remove(principal=admin(people.dave), username="alice"),
                lambda: member_remove(principal=admin(people.alice), username="dave"),
            ]
        outcome = tuple(race(*calls))
        tally[outcome] = tally.get(outcome, 0) + 1
        assert Membership.objects.filter(tenant_id="acme", role=ADMIN).count() == 1
    assert tally == {("LAST_ADMIN", "won"): TRIALS}
