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


def test_the_live_part_brings_the_last_hours_totals_and_chart_data_out_of_band(world, as_person):
    from runtime.fleet.services import process_beat
    from runtime.meter import WAIT_BOUNDS

    before = as_person(world.people.bob).get("/live/", headers={"HX-Request": "true"}).content.decode()
    assert '<span class="muted small" id="hour-summary" hx-swap-oob="true">the whole fleet: 0 tasks finished' in before
    waits = [0] * len(WAIT_BOUNDS)
    waits[2] = 5
    process_beat(kind="worker", totals={}, fresh={"completed": 5, "steps": 17}, waits=waits)
    html = as_person(world.people.bob).get("/live/", headers={"HX-Request": "true"}).content.decode()
    assert 'id="hour-summary" hx-swap-oob="true">the whole fleet: 5 tasks finished, 0 failed, 17 steps</span>' in html
    opening = '<script type="application/json" id="chart-data" hx-swap-oob="true">'
    chart = json.loads(html[html.index(opening) + len(opening) :].split("</script>")[0])
    # (Summed, not read off the last minute: the minute may turn between the beat and the read.)
    assert len(chart["t"]) == 60 and sum(chart["finished"]) == 5 and sum(chart["steps"]) == 17
    assert [p for p in chart["p50"] if p is not None] == [25.0]  # five claims in the 25 ms bucket
    # The full page draws the same partials without the out-of-band attribute.
    page = as_person(world.people.bob).get("/").content.decode()
    assert 'id="hour-summary">the whole fleet: 5 tasks finished' in page
    assert '<script type="application/json" id="chart-data">' in page


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
