"""Every screen renders for an operator and a viewer of acme (a broken template is a 500)."""

from __future__ import annotations

import pytest


def pages(w):
    return [
        "/",
        "/live/",
        "/tasks/",
        "/tasks/?status=blocked",
        "/tasks/new/",
        f"/tasks/{w.parent.id}/",
        f"/tasks/{w.parent.id}/live/",
        f"/tasks/{w.parent.id}/steps/",
        f"/tasks/{w.parent.id}/steps/1/",
        f"/tasks/{w.parent.id}/cancel/",
        f"/tasks/{w.parent.id}/stop/",
        f"/tasks/{w.done.id}/resume/",
        "/agents/",
        "/agents/t.steps/",
        "/agents/t.steps/stop/",
        "/effects/",
        "/effects/?state=any",
        f"/effects/{w.effect.id}/",
        "/pools/",
        f"/pools/{w.parent.pool_id}/",
        "/audit/",
        f"/audit/{w.audit.id}/",
        "/tokens/",
        f"/tasks/{w.blocked.id}/",
    ]


@pytest.mark.parametrize("who", ["alice", "dave"])
def test_every_screen_renders_for_an_operator(world, as_person, who):
    client = as_person(getattr(world.people, who))
    for url in pages(world):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code, response.content[:500])


def test_every_screen_a_viewer_may_read_renders_for_bob(world, as_person):
    client = as_person(world.people.bob)
    for url in pages(world):
        response = client.get(url)
        expected = 403 if url.endswith(("/cancel/", "/stop/", "/resume/", "/tasks/new/")) else 200
        assert response.status_code == expected, (url, response.status_code)
