"""The dashboard: what waits for a person, counts as words and numbers, workers and what
they hold (another tenant's tasks counted, not named), pools, the last hour."""

from __future__ import annotations

import json

import pytest

from runtime.models import Attempt, Process


def test_the_dashboard_shows_counts_unknown_effects_workers_and_pools(world, as_person):
    Process.objects.create(name="worker:vm:1", kind="worker", host="vm", pid=1)
    Attempt.objects.filter(task=world.other).update(ended_at=None)  # globex's task, held by the same worker
    html = as_person(world.people.bob).get("/").content.decode()
    assert "<h1>Dashboard</h1>" in html
    assert (
        '<li data-status="blocked" class="act"><a href="/tasks/?status=blocked"><span class="n">1</span> '
        '<span class="word">blocked</span></a></li>' in html
    )
    assert f'href="/effects/{world.effect.id}/"' in html and f"/effects/{world.other_effect.id}/" not in html
    assert "worker:vm:1" in html and f'href="/tasks/{world.parent.id}/"' in html
    assert "another tenant's task" in html and str(world.other.id) not in html  # globex's attempt on vm:1
    assert f'href="/pools/{world.parent.pool_id}/"' in html
    assert 'id="chart-data"' in html and 'id="chart-throughput"' in html


def test_the_live_part_refreshes_by_itself(world, as_person):
    response = as_person(world.people.bob).get("/live/", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="dashboard-now"') and "every 5s" in html
    assert "<html" not in html


def _beat(**tenants) -> None:
    """One worker's beat: what each tenant's tasks did (finished, failed, steps, claims in
    the 25 ms bucket), as the meter counts them."""
    from runtime.fleet.services import process_beat
    from runtime.meter import WAIT_BOUNDS, Counted

    minutes = {}
    for tenant, (finished, failed, steps, claims) in tenants.items():
        waits = [0] * len(WAIT_BOUNDS)
        waits[2] = claims
        minutes[tenant] = Counted(finished, failed, steps, waits)
    fresh = {
        "completed": sum(m.finished - m.failed for m in minutes.values()),
        "failed": sum(m.failed for m in minutes.values()),
        "steps": sum(m.steps for m in minutes.values()),
    }
    waits = [sum(column) for column in zip(*(m.waits for m in minutes.values()), strict=True)]
    process_beat(kind="worker", totals={}, fresh=fresh, waits=waits, tenants=minutes)


def _live(client) -> str:
    return client.get("/live/", headers={"HX-Request": "true"}).content.decode()


def _chart(html: str, opening: str = '<script type="application/json" id="chart-data" hx-swap-oob="true">') -> dict:
    return json.loads(html[html.index(opening) + len(opening) :].split("</script>")[0])


def test_the_live_part_brings_the_last_hours_totals_and_chart_data_out_of_band(world, as_person):
    bob = as_person(world.people.bob)
    before = _live(bob)
    assert '<span class="muted small" id="hour-summary" hx-swap-oob="true"><span id="tenant-hour"' in before
    assert "acme's tasks: 0 finished, 0 failed, 0 steps" in before
    _beat(acme=(5, 0, 17, 5))
    html = _live(bob)
    assert 'id="hour-summary" hx-swap-oob="true">' in html and "acme's tasks: 5 finished, 0 failed, 17 steps" in html
    chart = _chart(html)
    # (Summed, not read off the last minute: the minute may turn between the beat and the read.)
    assert len(chart["t"]) == 60 and sum(chart["finished"]) == 5 and sum(chart["steps"]) == 17
    assert [p for p in chart["p50"] if p is not None] == [25.0]  # five claims in the 25 ms bucket
    # The full page draws the same partials without the out-of-band attribute.
    page = bob.get("/").content.decode()
    assert 'id="hour-summary"><span id="tenant-hour"' in page and "acme's tasks: 5 finished" in page
    assert '<script type="application/json" id="chart-data">' in page


def test_each_tenant_sees_its_own_last_hour_and_only_a_fleet_manager_the_fleets(world, as_person):
    """carol (globex) sees globex's figures and charts, never acme's nor the fleet's sum;
    bob and dave (acme's viewer and admin) see acme's; a superuser who is a member of
    acme sees acme's, and the whole fleet's totals beside them, labelled as such: in the
    page and in each live refresh."""
    from django.contrib.auth import get_user_model

    from console.models import VIEWER, Membership

    _beat(acme=(5, 1, 17, 5), globex=(2, 0, 3, 2))
    _beat(acme=(1, 0, 4, 1))  # a second beat in the same minute adds to the same rows
    carol = as_person(world.people.carol)
    for html in (carol.get("/").content.decode(), _live(carol)):
        assert 'id="tenant-hour" data-finished="2" data-failed="0" data-steps="3"' in html
        assert "globex's tasks: 2 finished, 0 failed, 3 steps" in html
        assert 'id="fleet-hour"' not in html and "whole fleet" not in html
    chart = _chart(_live(carol))
    assert (sum(chart["finished"]), sum(chart["steps"]), sum(1 for p in chart["p50"] if p is not None)) == (2, 3, 1)
    for person in (world.people.bob, world.people.dave):
        html = _live(as_person(person))
        assert 'id="tenant-hour" data-finished="6" data-failed="1" data-steps="21"' in html
        assert 'id="fleet-hour"' not in html and "whole fleet" not in html

    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-password")
    Membership.objects.create(user=root, tenant_id="acme", role=VIEWER)
    for html in (as_person(root).get("/").content.decode(), _live(as_person(root))):
        assert 'id="tenant-hour" data-finished="6" data-failed="1" data-steps="21"' in html
        assert 'id="fleet-hour" data-finished="8" data-failed="1" data-steps="24"' in html
        assert "the whole fleet, every tenant: 8 tasks finished, 1 failed, 24 steps" in html
    # Its charts stay the tenant's, as the captions say.
    assert sum(_chart(_live(as_person(root)))["finished"]) == 6
    root.is_superuser = False  # no longer the deployment's: acme's figures only
    root.save(update_fields=["is_superuser"])
    assert 'id="fleet-hour"' not in _live(as_person(root))


def test_a_beat_with_no_tenant_named_counts_for_the_fleet_and_no_tenant(world, as_person):
    from runtime.fleet.selectors import throughput
    from runtime.fleet.services import process_beat

    process_beat(kind="worker", totals={}, fresh={"completed": 3, "steps": 4}, waits=[])
    assert sum(m.finished for m in throughput(minutes=5)) == 3
    assert sum(m.finished for m in throughput(minutes=5, tenant="acme")) == 0
    assert "acme's tasks: 0 finished" in _live(as_person(world.people.bob))


def test_the_dashboard_names_where_sweeps_run(world, as_person):
    from runtime.fleet.services import process_beat, process_name

    process_beat(kind="worker", totals={}, fresh={}, waits=[], swept=True)  # beat's sweep ran on a worker
    html = as_person(world.people.bob).get("/").content.decode()
    assert f'on <span class="mono">{process_name("worker")}</span>' in html
    assert "Sweeps: Celery beat sends them to the workers" in html and "0 supervisors" not in html
    process_beat(kind="supervisor", totals={}, fresh={}, waits=[], swept=True)
    html = as_person(world.people.bob).get("/").content.decode()
    assert "1 supervisor (<code>steward supervise</code>)" in html


def _usage(tenant: str, scope: str, subject: str, tokens: int) -> None:
    from runtime.models import TokenUsage

    TokenUsage.objects.create(tenant=tenant, scope=scope, subject=subject, shard=0, tokens=tokens, calls=1)


# (the tenant's budget, its counted tokens, the words shown, whether it is marked for action)
BUDGET_STATES = [
    (None, 500, "no budget", False),
    (1000, 500, "within budget (50%)", False),
    (1000, 899, "within budget (89%)", False),
    (1000, 900, "near its limit</span> (90%)", True),
    (1000, 1000, "exhausted</span>: model calls are refused", True),
    (1000, 4000, "exhausted</span>: model calls are refused", True),
]


@pytest.mark.parametrize(("limit", "used", "words", "marked"), BUDGET_STATES)
def test_the_dashboard_says_each_budget_s_state_in_words_and_marks_only_what_needs_action(
    world, as_person, limit, used, words, marked
):
    from runtime.limits.services import budget_set

    if limit is not None:
        budget_set(tenant="acme", actor="user:dave", tenant_tokens=limit)
    _usage("acme", "tenant", "acme", used)
    _usage("globex", "tenant", "globex", 10**6)  # another tenant's use is not shown
    html = as_person(world.people.bob).get("/").content.decode()
    section = html[html.index('id="budgets"') - 40 :]
    section = section[: section.index("</section>")]
    row = section[section.index('data-scope="tenant"') :]
    row = row[: row.index("</tr>")]
    assert f"{used} tokens" in row and words in row, row
    assert ('class="state act"' in row) is marked
    assert ("act-border" in section[:80]) is marked
    assert "1000000" not in section


def test_the_dashboard_lists_the_trees_that_used_the_most_against_the_tree_budget(world, as_person):
    from runtime.limits.services import budget_set

    budget_set(tenant="acme", actor="user:dave", tree_tokens=100)
    _usage("acme", "tree", str(world.parent.id), 95)
    html = as_person(world.people.bob).get("/").content.decode()
    row = html[html.index('data-scope="tree"') :]
    row = row[: row.index("</tr>")]
    assert f'href="/tasks/{world.parent.id}/"' in row and "near its limit" in row and "95 tokens" in row


def test_the_dashboard_shows_tasks_per_agent_version_and_which_workers_serve_each(world, as_person):
    from runtime import states
    from runtime.models import Task

    agent = world.parent.agent
    # Two queued tasks on version 1, one on 2 (another tenant's on 2 is not counted), and a
    # worker that serves only 2: version 1's tasks wait, in words and the one act colour.
    acme = Task.objects.filter(tenant="acme").exclude(status__in=states.TERMINAL).order_by("id")
    live = list(acme.values_list("id", flat=True)[:3])
    assert len(live) == 3
    Task.objects.filter(id__in=live[:2]).update(agent=agent, agent_version="1", status=states.QUEUED)
    Task.objects.filter(id=live[2]).update(agent=agent, agent_version="2", status=states.QUEUED)
    Task.objects.filter(id=world.other.id).update(agent=agent, agent_version="2", status=states.QUEUED)
    Process.objects.create(name="worker:vm:2", kind="worker", host="vm", pid=2, versions={agent: ["2"]})
    html = as_person(world.people.bob).get("/").content.decode()
    section = html[html.rindex("<section", 0, html.index('id="versions"')) :]
    section = section[: section.index("</section>")]
    assert "act-border" in section[:80]

    def row(version):
        found = section[section.index(f'id="version-{agent}-{version}"') :]
        return found[: found.index("</tr>")]

    assert "2 queued" in row(1) and "no live worker" in row(1) and '<span class="state act">waiting</span>' in row(1)
    assert "1 queued" in row(2) and "worker:vm:2" in row(2) and "waiting" not in row(2)  # not globex's
    # An agent on one version with nothing unfinished is counted, not listed.
    assert 'id="version-t.effect-' not in section and 'id="versions-quiet"' in section

    # Once a worker of version 1 beats too, nothing waits and nothing is coloured.
    Process.objects.create(name="worker:vm:3", kind="worker", host="vm", pid=3, versions={agent: ["1"]})
    html = as_person(world.people.bob).get("/").content.decode()
    section = html[html.rindex("<section", 0, html.index('id="versions"')) :]
    section = section[: section.index("</section>")]
    assert "act-border" not in section[:80] and "worker:vm:3" in row(1) and "waiting" not in row(1)
