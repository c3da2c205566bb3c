"""Effects to reconcile: unknown by default, what is known of one, and resolving it."""

from __future__ import annotations

from runtime import states
from runtime.models import AuditEvent, Effect, Task


def test_the_list_shows_unknown_effects_by_default_and_other_states_on_request(world, as_person):
    client = as_person(world.people.bob)
    html = client.get("/effects/").content.decode()
    assert f'<tr id="effect-{world.effect.id}" data-state="unknown">' in html
    assert f"effect-{world.other_effect.id}" not in html
    Effect.objects.filter(id=world.effect.id).update(state=states.COMMITTED)
    assert f"effect-{world.effect.id}" not in client.get("/effects/").content.decode()
    assert f"effect-{world.effect.id}" in client.get("/effects/?state=committed").content.decode()
    assert f"effect-{world.effect.id}" in client.get(f"/effects/?state=any&task={world.blocked.id}").content.decode()
    assert f"effect-{world.effect.id}" not in client.get("/effects/?state=any&effect_class=read").content.decode()


def test_an_effect_page_says_what_is_known_of_it(world, as_person):
    html = as_person(world.people.bob).get(f"/effects/{world.effect.id}/").content.decode()
    for known in (
        str(world.blocked.id)[:13],
        world.effect.key,
        world.effect.request_digest,
        "attempt 1",
        "vm:1",
        "irreversible",
        "unkeyed",
    ):
        assert known in html
    assert "<h1>Effect #" in html and ">Resolve<" not in html  # bob: no form


def test_resolving_as_committed_records_the_receipt_and_moves_the_blocked_task_on(world, as_person):
    response = as_person(world.people.alice).post(
        f"/effects/{world.effect.id}/resolve/",
        {"outcome": "committed", "receipt": '{"ref": "abc"}', "note": "it is in the outbox"},
    )
    assert response.status_code == 302
    effect = Effect.objects.get(id=world.effect.id)
    assert effect.state == states.COMMITTED and effect.receipt == {"ref": "abc"}
    assert effect.resolved_by == "user:alice"
    assert Task.objects.get(id=world.blocked.id).status == states.QUEUED
    event = AuditEvent.objects.get(task_id=world.blocked.id, kind="effect.resolved")
    assert event.data["via"]["channel"] == "console" and event.data["outcome"] == "committed"


def test_resolving_as_failed_needs_no_receipt(world, as_person):
    as_person(world.people.alice).post(f"/effects/{world.effect.id}/resolve/", {"outcome": "failed"})
    assert Effect.objects.get(id=world.effect.id).state == states.EFFECT_FAILED


def test_a_receipt_that_is_not_json_is_refused_on_the_form_keeping_what_was_typed(world, as_person):
    response = as_person(world.people.alice).post(
        f"/effects/{world.effect.id}/resolve/", {"outcome": "committed", "receipt": "{ref: abc", "note": "typed"}
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert "receipt is not JSON" in html and "{ref: abc</textarea>" in html and 'value="typed"' in html
    assert 'value="committed" checked' in html
    assert Effect.objects.get(id=world.effect.id).state == states.UNKNOWN


def test_resolving_twice_is_refused_with_409(world, as_person):
    client = as_person(world.people.alice)
    client.post(f"/effects/{world.effect.id}/resolve/", {"outcome": "failed"})
    assert client.post(f"/effects/{world.effect.id}/resolve/", {"outcome": "failed"}).status_code == 409


def test_send_it_again_puts_the_effect_back_to_intent_and_queues_the_task(world, as_person):
    as_person(world.people.alice).post(f"/effects/{world.effect.id}/resolve/", {"outcome": "retry", "note": "not sent"})
    effect = Effect.objects.get(id=world.effect.id)
    assert effect.state == states.INTENT and effect.resend_approved
    assert Task.objects.get(id=world.blocked.id).status == states.QUEUED


def test_a_partial_effect_is_listed_under_its_state_and_its_page_says_what_was_delivered(world, as_person):
    Effect.objects.filter(id=world.effect.id).update(
        state=states.PARTIAL,
        receipt={
            "untrusted": True,
            "cut": "AUTHZ_REVOKED",
            "chunks": 7,
            "text_length": 23,
            "call": "c-1",
            "decision": "d-1",
            "denial": "d-2",
            "boundary": "credential_gateway",
            "reason_code": "no_grant_agent",
        },
    )
    client = as_person(world.people.bob)
    listed = client.get("/effects/?state=partial").content.decode()
    assert f'<tr id="effect-{world.effect.id}" data-state="partial">' in listed
    assert "<option selected>partial</option>" in listed
    assert f"effect-{world.effect.id}" not in client.get("/effects/").content.decode()  # not waiting for a person
    html = client.get(f"/effects/{world.effect.id}/").content.decode()
    assert 'data-state="partial">partial</span>' in html
    assert "Cut short" in html and "7 chunks (23 characters) had been delivered" in html
    assert "no_grant_agent at credential_gateway" in html and "What was delivered" in html
    assert ">Resolve<" not in html  # only an unknown effect is resolved by a person
