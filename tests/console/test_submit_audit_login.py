"""Submitting from the form, the audit trail (filters, export, verify), signing in and
switching tenant."""

from __future__ import annotations

import json

import pytest

from console.models import Membership
from runtime.models import AuditEvent, Task
from tests.people import PASSWORD


def test_submit_from_schema_fields_redirects_to_the_new_task(world, as_person):
    client = as_person(world.people.alice)
    form = client.get("/tasks/new/?agent=notify.send").content.decode()
    assert 'name="in.to"' in form and 'name="in.message"' in form and 'name="input"' in form
    response = client.post(
        "/tasks/new/",
        {"agent": "notify.send", "in.to": "ops@example.com", "in.message": "hello", "idempotency_key": "k-1"},
    )
    assert response.status_code == 302
    task = Task.objects.get(idempotency_key="k-1")
    assert response["Location"] == f"/tasks/{task.id}/"
    assert task.input == {"to": "ops@example.com", "message": "hello"} and task.owner == "user:alice"
    event = AuditEvent.objects.get(task_id=task.id, kind="task.submitted")
    assert event.data["via"]["channel"] == "console"


def test_submit_from_json_and_the_same_key_returns_the_same_task(world, as_person):
    client = as_person(world.people.alice)
    data = {"agent": "t.steps", "input": '{"n": 2}', "idempotency_key": "k-2"}
    first, again = client.post("/tasks/new/", data), client.post("/tasks/new/", data)
    assert first["Location"] == again["Location"]
    conflict = client.post("/tasks/new/", {**data, "input": '{"n": 3}'})
    assert conflict.status_code == 409 and b"IDEMPOTENCY_CONFLICT" in conflict.content


def test_a_bad_input_is_refused_naming_the_field_and_keeping_what_was_typed(world, as_person):
    response = as_person(world.people.alice).post(
        "/tasks/new/", {"agent": "research.batch", "in.question": "", "in.experiments": "99"}
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert "question" in html and "experiments" in html and 'value="99"' in html
    assert '<span class="field-error" role="alert">Input should be less than or equal to 20</span>' in html
    broken = as_person(world.people.alice).post("/tasks/new/", {"agent": "t.steps", "input": "{nope"})
    assert (
        broken.status_code == 422 and b"input is not JSON" in broken.content and b"{nope</textarea>" in broken.content
    )


def test_the_agent_picker_swaps_in_that_agents_fields(world, as_person):
    response = as_person(world.people.alice).get("/tasks/new/?agent=research.batch", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="agent-fields">') and 'name="in.question"' in html


def audit_ids(html: str) -> set[int]:
    return {int(part.split('"')[0]) for part in html.split('<tr id="audit-')[1:]}


def test_the_audit_trail_filters_by_kind_actor_and_task_and_by_qualifiers(world, as_person):
    client = as_person(world.people.bob)
    everything = audit_ids(client.get("/audit/").content.decode())
    assert world.audit.id in everything and world.other_audit.id not in everything
    submitted = audit_ids(client.get("/audit/?kind=task.submitted").content.decode())
    assert submitted == set(
        AuditEvent.objects.filter(tenant="acme", kind="task.submitted").values_list("id", flat=True)
    )
    assert audit_ids(client.get("/audit/?q=kind:task.submitted+actor:user:alice").content.decode()) == submitted
    chain = audit_ids(client.get(f"/audit/?task={world.parent.id}").content.decode())
    assert chain == set(AuditEvent.objects.filter(task_id=world.parent.id).values_list("id", flat=True))
    assert audit_ids(client.get("/audit/?since=2999-01-01").content.decode()) == set()


def test_an_audit_event_shows_its_chain_position(world, as_person):
    html = as_person(world.people.bob).get(f"/audit/{world.audit.id}/").content.decode()
    assert world.audit.chain in html and bytes(world.audit.hash).hex() in html
    assert "<h1>Audit event #" in html and "Previous hash" in html


def test_the_export_streams_exactly_the_filtered_events_with_their_chain_positions(world, as_person):
    client = as_person(world.people.bob)
    response = client.get("/audit/export.jsonl?kind=task.submitted")
    assert response.streaming and response["Content-Disposition"].startswith("attachment;")
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    expected = AuditEvent.objects.filter(tenant="acme", kind="task.submitted").order_by("-at", "-id")
    assert [line["id"] for line in lines] == list(expected.values_list("id", flat=True))
    first = expected.first()
    assert lines[0]["chain"] == first.chain and lines[0]["chain_seq"] == first.chain_seq
    assert lines[0]["hash"] == bytes(first.hash).hex() and lines[0]["prev_hash"] == bytes(first.prev_hash).hex()


@pytest.mark.django_db(transaction=True)
def test_verify_shows_rows_checked_and_that_the_trail_holds(client):
    from tests.console.world import make_world

    world = make_world()
    client.force_login(world.people.bob)  # reading: a viewer may verify
    response = client.post("/audit/verify/", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<div id="verify-result"')
    assert 'data-ok="true"' in html and "The trail verifies" in html
    rows = int(html.split("</h2>\n  <p>")[1].split(" ")[0])
    assert rows == AuditEvent.objects.filter(tenant="acme").count()  # its own chains only
    assert b'id="verify-result"' in client.post("/audit/verify/").content  # without htmx: a page


def test_sign_in_with_the_form_and_sign_out(world, client):
    page = client.get("/login/").content.decode()
    assert 'name="username"' in page and 'name="password"' in page and ">Sign in</button>" in page
    response = client.post("/login/", {"username": "alice", "password": PASSWORD, "next": "/tasks/"})
    assert response.status_code == 302 and response["Location"] == "/tasks/"
    html = client.get("/").content.decode()
    assert '<form id="tenant-switcher"' in html and "alice" in html and "operator" in html
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_a_wrong_password_says_so(world, client):
    response = client.post("/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200 and b"do not match" in response.content


def test_switching_tenant_changes_what_is_seen_and_a_stranger_tenant_is_404(world, as_person):
    Membership.objects.create(user=world.people.alice, tenant_id="globex", role="viewer")
    client = as_person(world.people.alice)
    assert client.get(f"/tasks/{world.other.id}/").status_code == 404
    response = client.post("/tenant/", {"tenant": "globex", "next": f"/tasks/{world.parent.id}/"})
    assert response.status_code == 302 and response["Location"] == "/tasks/"
    assert client.get(f"/tasks/{world.other.id}/").status_code == 200
    assert client.get(f"/tasks/{world.parent.id}/").status_code == 404
    assert b'<span class="role">viewer</span>' in client.get("/").content
    assert client.post("/tenant/", {"tenant": "initech"}).status_code == 404


def _numbers(event) -> str:
    """How a page numbers `event`: its link and its place in its chain, as one string."""
    chain = "task" if event.task_id else "tenant"
    return (
        f'<a href="/audit/{event.id}/">#{event.id}</a> <span class="chain-no muted small nowrap" '
        f'data-event="{event.id}" data-chain-seq="{event.chain_seq}" title="#{event.chain_seq} in the hash chain '
        f'{event.chain}, hash {bytes(event.hash).hex()}; #{event.id} in the whole trail">{chain} #{event.chain_seq}</span>'
    )


def test_an_audit_event_is_numbered_the_same_way_on_the_trail_the_task_page_the_grant_and_its_own_page(
    world, as_person
):
    """Its id (the trail's one sequence, its address) and its place in its own chain, both,
    wherever it is listed: once the task page showed only the chain position and the trail
    only the id."""
    from runtime.authz.services import grant_create

    client = as_person(world.people.bob)
    of_task = list(AuditEvent.objects.filter(task_id=world.parent.id).order_by("chain_seq"))
    assert of_task and of_task[-1].chain_seq != of_task[-1].id  # the two numbers differ
    trail = client.get(f"/audit/?task={world.parent.id}").content.decode()
    task_page = client.get(f"/tasks/{world.parent.id}/").content.decode()
    for event in of_task:
        assert _numbers(event) in trail
        assert _numbers(event) in task_page

    grant = grant_create(
        tenant="acme", principal="agent:t.steps", action="tool.search", resource="repo:acme/*", actor="user:dave"
    )
    created = AuditEvent.objects.filter(tenant="acme", kind="grant.created").latest("id")
    assert created.task_id is None
    for html in (client.get("/audit/").content.decode(), client.get(f"/grants/{grant.id}/").content.decode()):
        assert _numbers(created) in html and f"tenant #{created.chain_seq}</span>" in html

    own = client.get(f"/audit/{of_task[-1].id}/").content.decode()
    assert f'<h1>Audit event #{of_task[-1].id} <span class="chain-no' in own
    assert f">task #{of_task[-1].chain_seq}</span>" in own


@pytest.mark.django_db(transaction=True)
def test_the_verdicts_first_bad_row_is_numbered_as_everywhere_else(client):
    from tests.console.world import make_world
    from tests.tamper import bypassing_the_triggers

    world = make_world()
    bad = AuditEvent.objects.filter(task_id=world.parent.id).order_by("chain_seq").first()
    bypassing_the_triggers("UPDATE steward_audit SET actor = 'user:mallory' WHERE id = %s", [bad.id])
    client.force_login(world.people.bob)
    html = client.post("/audit/verify/", headers={"HX-Request": "true"}).content.decode()
    assert 'data-ok="false"' in html
    assert (
        f'First bad row: <a href="/audit/{bad.id}/">#{bad.id}</a> <span class="chain-no muted small nowrap" '
        f'data-event="{bad.id}" data-chain-seq="{bad.chain_seq}" title="#{bad.chain_seq} in the hash chain '
        f'{bad.chain}; #{bad.id} in the whole trail">task #{bad.chain_seq}</span>: '
    ) in html
