"""Agents, pools, tokens and health over the API."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from console.models import ApiToken
from runtime.models import AuditEvent, Pool
from tests.api.conftest import Api, assert_error


def test_agents_are_listed_with_their_pool_and_input_schema(alice):
    agents = {a["name"]: a for a in alice.get("agents").json()}
    batch = agents["research.batch"]
    assert batch["pool"] == "research"
    assert batch["input_schema"]["required"] == ["question"]
    assert set(batch["input_schema"]["properties"]) >= {"question", "experiments"}
    assert agents["t.steps"]["input_schema"] is None
    assert alice.get("agents/research.batch").json() == batch


def test_pools_show_occupancy_and_an_operator_changes_their_limits(alice):
    alice.post("tasks", {"agent": "t.steps"})
    (pool,) = [p for p in alice.get("pools").json()["items"] if p["name"] == "default"]
    assert (pool["queued"], pool["running"], pool["slots_held"]) == (1, 0, 0)
    changed = alice.patch("pools/default", {"max_running": 7, "max_queued": 100}).json()
    assert (changed["name"], changed["max_running"], changed["max_queued"], changed["queued"]) == ("default", 7, 100, 1)
    assert (Pool.objects.get(name="default").max_running, Pool.objects.get(name="default").max_queued) == (7, 100)
    event = AuditEvent.objects.filter(kind="pool.limits").get()
    assert (event.actor, event.data["max_running"]) == ("user:alice", 7)


def test_a_token_is_made_with_its_secret_shown_once_then_listed_without_it(alice):
    made = alice.post(
        "tokens", {"name": "ci", "scope": "read", "expires_at": (timezone.now() + timedelta(days=1)).isoformat()}
    )
    assert made.status_code == 201
    body = made.json()
    assert body["secret"].startswith(body["prefix"]) and body["scope"] == "read" and body["owner"] == "alice"
    listed = {t["id"]: t for t in alice.get("tokens").json()["items"]}
    assert "secret" not in listed[body["id"]] and listed[body["id"]]["name"] == "ci"
    assert Api(body["secret"]).get("tasks").status_code == 200


def test_a_revoked_token_is_refused_at_once_and_revoking_it_again_is_409(alice):
    body = alice.post("tokens", {"name": "short", "scope": "operate"}).json()
    other = Api(body["secret"])
    assert other.get("tasks").status_code == 200
    revoked = alice.delete(f"tokens/{body['id']}").json()
    assert revoked["revoked_at"] and revoked["revoked_by"] == "user:alice"
    assert_error(other.get("tasks"), 401, "AUTH_REQUIRED")
    assert_error(alice.post(f"tokens/{body['id']}/revoke"), 409, "INVALID_TRANSITION")


def test_a_person_sees_their_own_tokens_and_an_admin_the_tenants(people, tokens):
    mine = {t["owner"] for t in Api(tokens.alice).get("tokens").json()["items"]}
    everyone = {t["owner"] for t in Api(tokens.dave).get("tokens").json()["items"]}
    assert mine == {"alice"} and everyone == {"alice", "bob", "dave"}


def test_only_an_admin_makes_a_token_for_another_member(tokens):
    assert_error(Api(tokens.alice).post("tokens", {"name": "for bob", "owner": "bob"}), 403, "FORBIDDEN")
    made = Api(tokens.dave).post("tokens", {"name": "for bob", "owner": "bob"}).json()
    assert made["owner"] == "bob" and made["scope"] == "read"
    assert_error(Api(tokens.dave).post("tokens", {"name": "x", "owner": "carol"}), 404, "TOKEN_NOT_FOUND")
    assert_error(Api(tokens.dave).post("tokens", {"name": "x", "owner": "bob", "scope": "operate"}), 403, "FORBIDDEN")


def test_a_token_in_the_past_is_refused(alice):
    assert_error(alice.post("tokens", {"name": "x", "expires_at": "2000-01-01T00:00:00Z"}), 400, "INVALID_ARGUMENT")
    assert ApiToken.objects.filter(name="x").count() == 0


def test_health_needs_no_token_and_says_what_is_down(db):
    response = Api(None).get("health")
    body = response.json()
    assert body["database"] is True and body["database_ms"] >= 0
    assert set(body) >= {"ok", "broker", "last_sweep_at", "live_workers", "live_supervisors"}
    # No worker or supervisor runs in this test: the fleet is not well, and says so.
    assert (response.status_code, body["ok"], body["live_workers"]) == (503, False, 0)


def test_the_schema_and_the_docs_are_served_from_our_own_host(client):
    schema = client.get("/api/v1/openapi.json").json()
    assert schema["info"]["version"] == "1"
    assert schema["components"]["securitySchemes"]["BearerToken"]["scheme"] == "bearer"
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert operation.get("summary"), (method, path)
            assert operation.get("tags"), (method, path)
            if path != "/api/v1/health":  # each route's refusals: tests/api/test_schema.py
                assert operation["responses"]["401"]["description"] == "AUTH_REQUIRED", (method, path)
    page = client.get("/api/v1/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in page
    assert "http://" not in page and "https://" not in page and "//cdn" not in page


def test_the_effects_waiting_for_a_person_are_listed_and_filtered(alice):
    from tests.api.world import blocked_task_with_unknown_effect

    task, effect = blocked_task_with_unknown_effect()
    waiting = alice.get("effects", state="unknown").json()["items"]
    assert [(e["id"], e["task"], e["key"], e["attempt_epoch"]) for e in waiting] == [
        (effect.id, str(task.id), effect.key, 1)
    ]
    assert alice.get("effects", state="committed").json()["items"] == []
    assert [e["id"] for e in alice.get("effects", effect_class="irreversible").json()["items"]] == [effect.id]
    assert [e["id"] for e in alice.get(f"tasks/{task.id}/effects").json()["items"]] == [effect.id]
    assert alice.get(f"effects/{effect.id}").json()["request_digest"] == effect.request_digest


def _read_all(api: Api, path: str, limit: int, **query) -> list[dict]:
    """Every item of a list, page after page; each page at most `limit`."""
    items, cursor = [], None
    while True:
        page = api.get(path, limit=limit, **query, **({"cursor": cursor} if cursor else {})).json()
        assert len(page["items"]) <= limit
        items += page["items"]
        if not (cursor := page["next_cursor"]):
            return items


def test_every_token_is_listed_a_page_at_a_time_past_the_old_cap_of_1000(people, tokens):
    """The list stopped at 1,000 tokens, silently, and took no cursor: revoked tokens are
    kept for the audit trail, so a tenant's scripts outgrow any cap."""
    dave = people.dave
    ApiToken.objects.bulk_create(
        ApiToken(
            prefix=f"stw_bulk{n:06d}",
            digest=n.to_bytes(32, "big"),
            user=dave,
            tenant_id="acme",
            name=f"script {n}",
            scope="read",
            created_by="user:dave",
        )
        for n in range(1_001)
    )
    listed = _read_all(Api(tokens.dave), "tokens", limit=500)
    ids = [t["id"] for t in listed]
    assert len(ids) == len(set(ids)) == ApiToken.objects.filter(tenant_id="acme").count() == 1_005
    assert ids == sorted(ids, reverse=True)  # newest first
    assert {t["owner"] for t in _read_all(Api(tokens.alice), "tokens", limit=2)} == {"alice"}


def test_a_token_cursor_is_refused_on_another_list_or_by_another_person(tokens):
    first = Api(tokens.dave).get("tokens", limit=1).json()
    assert first["next_cursor"]
    assert_error(Api(tokens.alice).get("tokens", cursor=first["next_cursor"]), 422, "INVALID_INPUT")
    assert_error(Api(tokens.dave).get("tasks", cursor=first["next_cursor"]), 422, "INVALID_INPUT")
