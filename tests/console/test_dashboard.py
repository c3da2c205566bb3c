"""The dashboard: what waits for a person, counts as words and numbers, workers and what
they hold (another tenant's tasks counted, not named), pools, the last hour."""

from __future__ import annotations

from runtime.models import Attempt, Process


def test_the_dashboard_shows_counts_unknown_effects_workers_and_pools(world, as_person):
    Process.objects.create(name="worker:vm:1", kind="worker", host="vm", pid=1)
    Attempt.objects.filter(task=world.other).update(ended_at=None)  # globex's task, held by the same worker
    html = as_person(world.people.bob).get("/").content.decode()
    assert "<h1>Dashboard</h1>" in html
    assert '<li data-status="blocked" class="act"><a href="/tasks/?status=blocked"><span class="n">1</span> ' \
           '<span class="word">blocked</span></a></li>' in html
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
