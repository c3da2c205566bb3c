"""`make run`'s demo shows agent versions (issue 23, docs/adr/0037-agent-versions.md): its
workers serve two versions of research.digest at once, the seed leaves a task on each,
and the console's upgrade button moves the old one to the new version, where it finishes."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from console.dev.demo.seed import seed_demo
from runtime import states
from runtime.models import AuditEvent, Task
from runtime.testing import StewardTestEnv

pytestmark = pytest.mark.django_db(transaction=True)
OVERNIGHT = 900  # the seeded digests' sleep


def test_the_demo_runs_two_versions_of_one_agent_and_the_console_upgrades_the_old_task(settings, client):
    settings.DEBUG = True
    with StewardTestEnv() as env:
        seed_demo()
        digests = {t.idempotency_key: t.id for t in Task.objects.filter(agent="research.digest")}
        old, new = digests["demo-digest-v1"], digests["demo-digest-v2"]
        # Only the digests run here: the other demo tasks call outside services.
        Task.objects.exclude(agent="research.digest").update(status=states.CANCELLED)
        env.run_until_idle()
        tasks = {t.id: t for t in Task.objects.filter(id__in=[old, new])}
        assert {(t.status, t.agent_version) for t in tasks.values()} == {
            (states.SLEEPING, "1"),
            (states.SLEEPING, "2"),
        }
        assert tasks[old].agent_version == "1" and tasks[new].agent_version == "2"

        client.force_login(get_user_model().objects.get(username="alice"))
        agents_page = client.get("/agents/").content.decode()
        assert 'id="version-research.digest-1"' in agents_page and 'id="version-research.digest-2"' in agents_page
        page = client.get(f"/tasks/{old}/").content.decode()
        assert 'id="upgrade-button"' in page
        assert 'id="upgrade-button"' not in client.get(f"/tasks/{new}/").content.decode()  # on the current one

        response = client.post(f"/tasks/{old}/upgrade/", follow=True)
        assert response.status_code == 200
        assert "Upgraded from version 1 to 2." in response.content.decode()
        assert Task.objects.get(id=old).agent_version == "2"
        event = AuditEvent.objects.get(task_id=old, kind="task.upgraded")
        assert event.actor == "user:alice" and (event.data["from"], event.data["to"]) == ("1", "2")

        env.advance(OVERNIGHT + 60)
        env.run_until_idle()
    finished = {t.id: t.output for t in Task.objects.filter(id__in=[old, new])}
    assert finished[old]["version"] == "2" and finished[new]["version"] == "2"
    assert finished[old]["digest"] == "optimizers: 3 notes" and "ranked" in finished[old]
