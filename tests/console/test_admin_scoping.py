"""The Django admin never crosses tenants (issue 17): dave, admin of acme and staff with
every permission of every model the admin shows, is tried on each registered ModelAdmin
(admin.site._registry, walked here, so a ModelAdmin added later without its scoping fails
this test) × each of its views, naming globex's rows: the changelist and its filters'
choices, a filter or a search on globex's values, the facet counts, the change form (GET
and POST), the history (Django's LogEntry), delete, the old object URL, "view on site",
a person's password form, every action (with the id selected, and across a globex
filter) and the autocomplete of every relation that points at the model. Each answer is
404, or a page with none of globex's rows, names or ids; nothing changes in any table.
A superuser reads every tenant; a staff member of no tenant reads nothing. `make stress`
runs the same table over many globex rows of each model.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from urllib.parse import quote, quote_plus

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.utils.html import escape

from console.models import Membership
from runtime.authz.credentials import worker_credential_create
from runtime.authz.services import grant_create
from runtime.models import Attempt, AuditEvent, Effect, Grant, Pool, Slot, Task, WorkerCredential
from tests.console.world import attempt, make_world, submit, unknown_effect
from tests.snapshot import snapshot

User = get_user_model()
# Anything of globex's on a page dave reads is a leak: its names, its person, its ids
# (each foreign row's id and change URL are added per row).
SECRETS = ("globex", "carol")
# Ids no model has, or of the wrong kind: each is 404 (never a 500), like another tenant's.
HOSTILE_IDS = ["0", "-1", "99999999999999999999999", str(uuid.uuid4()), "1 OR 1=1", "..%2F..%2Fadmin", "%00", "x" * 300]


@dataclass
class Rows:
    """For each registered model, rows of acme's (dave reads them) and of globex's (never)."""

    mine: dict = field(default_factory=dict)
    theirs: dict = field(default_factory=dict)


def _hold_slot(task: Task) -> Slot:
    slot = Slot.objects.filter(pool_id=task.pool_id, task__isnull=True).order_by("number").first()
    Slot.objects.filter(id=slot.id).update(task=task, epoch=max(task.epoch, 1))
    return Slot.objects.get(id=slot.id)


def _grant(tenant: str, resource: str) -> Grant:
    by = "user:dave" if tenant == "acme" else "user:carol"
    return grant_create(tenant=tenant, principal="agent:t.steps", action="tool.search", resource=resource, actor=by)


def make_rows(world, many: int) -> Rows:
    """One globex row per model (`many` = 1), or `many` of each (the stress form)."""
    rows = Rows()
    acme_pool = Pool.objects.get(name=world.parent.pool_id)
    rows.mine = {
        Task: [world.parent],
        Attempt: [Attempt.objects.filter(task=world.parent).first()],
        Effect: [world.effect],
        Pool: [acme_pool],
        Slot: [_hold_slot(world.parent)],
        AuditEvent: [world.audit],
        Grant: [_grant("acme", "repo:acme/*")],
        User: [world.people.alice],
        Group: [],  # groups are a superuser's (console/admin.py GroupsAdmin)
        WorkerCredential: [],  # the deployment's: a superuser's (console/admin.py)
    }
    tasks = [world.other] + [submit("globex", "carol", n=1) for _ in range(many - 1)]
    effects = [world.other_effect] + [unknown_effect(t, attempt(t, ended=True)) for t in tasks[1:]]
    people = [world.people.carol] + [
        User.objects.create_user(f"globex-person-{i}", f"g{i}@globex.example", "pw") for i in range(many - 1)
    ]
    for person in people[1:]:
        Membership.objects.create(user=person, tenant_id="globex", role="viewer")
    groups = [Group.objects.create(name=f"globex-ops-{i}") for i in range(many)]
    groups[0].user_set.add(world.people.carol)
    rows.theirs = {
        Task: tasks,
        Attempt: list(Attempt.objects.filter(task__in=tasks)),
        Effect: effects,
        Pool: [],  # pools are fleet-wide: every member reads them, as on /pools/
        Slot: [_hold_slot(t) for t in tasks[: min(len(tasks), 10)]],
        AuditEvent: list(AuditEvent.objects.filter(tenant="globex").order_by("id")[:many]),
        Grant: [_grant("globex", f"repo:globex/{i}/*") for i in range(many)],
        User: people,
        Group: groups,
        WorkerCredential: [worker_credential_create(name=f"w{i}", actor="user:root").credential for i in range(many)],
    }
    # Each foreign row has a history, as if a superuser had edited it: the history page must
    # not show it to dave.
    root = User.objects.filter(username="root").first() or User.objects.create_superuser("root", "r@x.example", "pw")
    for found in rows.theirs.values():
        if found:
            LogEntry.objects.log_actions(
                user_id=root.id, queryset=found, action_flag=CHANGE, change_message="globex secret note"
            )
    return rows


def staff(user):
    """Staff with every permission of every model the admin shows: the scoping, not a
    missing model permission, must be what keeps globex's rows from them."""
    user.is_staff = True
    user.save()
    models = [model for model in admin.site._registry]
    user.user_permissions.set(
        Permission.objects.filter(content_type__in=ContentType.objects.get_for_models(*models).values())
    )
    return User.objects.get(id=user.id)


def url(model, *parts: str) -> str:
    return "/".join([f"/admin/{model._meta.app_label}/{model._meta.model_name}", *parts, ""])


def shown_pks(response) -> set[str]:
    """The ids of the rows a changelist shows (its ChangeList's result list)."""
    return {str(obj.pk) for obj in response.context["cl"].result_list}


def filter_choices(response) -> list[str]:
    cl = response.context["cl"]
    return [str(choice["display"]) for spec in cl.filter_specs for choice in spec.choices(cl)]


def leaks(body: str, secrets: list[str], echoed: dict | None = None) -> list[str]:
    """The secrets a page shows, once the request's own parameters (`echoed`, name to
    value) are taken out where the changelist repeats them: in its links' query strings
    (and the `_changelist_filters` a row's link carries) and in the search box or the
    hidden inputs that carry them."""
    for name, given in (echoed or {}).items():
        value = str(given)
        for form in (quote_plus(value), quote(value, safe=""), escape(value), value):
            body = body.replace(f"{name}={form}", f"{name}=").replace(f'name="{name}" value="{form}"', "")
        body = body.replace(quote_plus(f"{name}={value}"), "")  # inside ?_changelist_filters=
    lowered = body.lower()
    return [secret for secret in secrets if secret.lower() in lowered]


def secrets_of(rows: Rows) -> list[str]:
    found = list(SECRETS)
    for model, objs in rows.theirs.items():
        for obj in objs:
            found.append(url(model, quote(str(obj.pk)), "change"))
            if isinstance(obj.pk, uuid.UUID):
                found.append(str(obj.pk))
    found += [str(t.id) for t in rows.theirs[Task]]
    return found


def filter_params(model_admin, obj) -> list[dict]:
    """A query per list_filter entry, selecting `obj`'s own value (and the `__exact` form
    the issue's `?tenant__exact=globex` uses)."""
    queries = []
    for entry in model_admin.list_filter:
        name = entry[0] if isinstance(entry, tuple) else entry
        if not isinstance(name, str):
            continue
        model_field = model_admin.model._meta.get_field(name)
        if model_field.many_to_many:
            value = next(iter(getattr(obj, name).values_list("pk", flat=True)), None)
            if value is not None:
                queries.append({f"{name}__{model_field.target_field.name}__exact": value})
        elif model_field.is_relation:
            queries.append({f"{name}__{model_field.target_field.name}__exact": getattr(obj, model_field.attname)})
        else:
            value = getattr(obj, name)
            queries += [{name: value}, {f"{name}__exact": value}]
    return queries


def autocompletes_into(model) -> list[tuple[str, str, str]]:
    """(app_label, model_name, field_name) of every relation, of any installed model, that
    points at `model`: the autocomplete view takes any of them, with no autocomplete_fields
    needed, and searches `model`'s ModelAdmin."""
    found = []
    for source in apps.get_models():
        for relation in source._meta.get_fields():
            if relation.is_relation and not relation.auto_created and relation.related_model is model:
                found.append((source._meta.app_label, source._meta.model_name, relation.name))
    return found


def action_names(model_admin, superuser_request) -> list[str]:
    return sorted(set(model_admin.get_actions(superuser_request)) | {"delete_selected"})


def try_every_view(client, model, obj, rows: Rows, superuser_request) -> dict:
    """Every view of `model`'s ModelAdmin, as `client`, naming `obj` (another tenant's):
    what went wrong, by view (empty: nothing leaked, everything was 404)."""
    model_admin = admin.site._registry[model]
    secrets = secrets_of(rows)
    pk = quote(str(obj.pk))
    wrong = {}

    def check_page(name: str, response, *, echoed: dict | None = None):
        if response.status_code != 200:
            wrong[name] = response.status_code
            return
        if "cl" in (response.context or {}):
            shown = shown_pks(response) & {str(o.pk) for o in rows.theirs[model]}
            if shown:
                wrong[name] = f"shows {sorted(shown)}"
            choices = [c for c in filter_choices(response) if leaks(c, list(SECRETS))]
            if choices:
                wrong[f"{name} filter choices"] = choices
        found = leaks(response.content.decode(), secrets, echoed)
        if found:
            wrong[name] = f"names {found}"

    check_page("changelist", client.get(url(model)))
    check_page("facets", client.get(url(model) + "?_facets=1"))
    for term in [str(obj.pk), *SECRETS]:
        check_page(f"search {term}", client.get(url(model), {"q": term}), echoed={"q": term})
    for query in filter_params(model_admin, obj):
        got = client.get(url(model), query)
        if got.status_code == 400 or (got.status_code == 302 and "e=1" in got["Location"]):
            continue  # Django refused a lookup it does not offer this person: it showed nothing
        check_page(f"filter {query}", got, echoed=query)
    for name, method, path, data in [
        ("change", "get", url(model, pk, "change"), None),
        ("change POST", "post", url(model, pk, "change"), {"username": "mine", "reason": "x", "_save": "Save"}),
        ("history", "get", url(model, pk, "history"), None),
        ("delete", "get", url(model, pk, "delete"), None),
        ("delete POST", "post", url(model, pk, "delete"), {"post": "yes"}),
        ("password", "get", url(model, pk, "password"), None),
    ]:
        if name == "password" and model is not User:
            continue
        status = getattr(client, method)(path, data or {}).status_code
        if status != 404:
            wrong[name] = status
    old = client.get(url(model, pk), follow=True)
    if old.status_code != 404:
        wrong["old object URL"] = old.status_code
    content_type = ContentType.objects.get_for_model(model)
    on_site = client.get(f"/admin/r/{content_type.id}/{pk}/")
    missing = client.get(f"/admin/r/{content_type.id}/{pk}0/")
    if on_site.status_code != 404 or missing.status_code != 404:
        wrong["view on site"] = (on_site.status_code, missing.status_code)
    # Each action with the row selected, then (where the changelist filters by tenant) across
    # every row of the changelist filtered on globex, as the URL has it.
    tries = [(False, "")] + ([(True, "?tenant__exact=globex")] if "tenant" in model_admin.list_filter else [])
    for action in action_names(model_admin, superuser_request):
        form = {"action": action, "_selected_action": [str(obj.pk)], "index": 0, "confirm": "yes", "reason": "x"}
        for across, query in tries:
            posted = client.post(url(model) + query, {**form, **({"select_across": 1} if across else {})}, follow=True)
            # The filter is echoed back on the changelist the action returns to: "globex" there
            # is what dave typed; its rows, ids and names would not be.
            echoed = {"tenant__exact": "globex"} if across else None
            check_page(f"action {action}{' across' if across else ''}", posted, echoed=echoed)
    for app_label, model_name, field_name in autocompletes_into(model):
        for term in ("", *SECRETS, str(obj.pk)[:8]):
            got = client.get(
                "/admin/autocomplete/",
                {"app_label": app_label, "model_name": model_name, "field_name": field_name, "term": term},
            )
            if got.status_code in (403, 404):
                continue
            ids = {result["id"] for result in got.json()["results"]} if got.status_code == 200 else None
            if ids is None or ids & {str(o.pk) for o in rows.theirs[model]}:
                wrong[f"autocomplete {app_label}.{model_name}.{field_name} {term!r}"] = ids or got.status_code
    return wrong


@pytest.fixture
def superuser_request(rf):
    request = rf.get("/admin/")
    request.user = User.objects.create_superuser("admin-reader", "ar@example.com", "pw")
    return request


def registry() -> list:
    return sorted(admin.site._registry, key=lambda model: model._meta.label)


def run_table(client, rows: Rows, superuser_request) -> dict:
    missing = [model._meta.label for model in registry() if model not in rows.theirs]
    assert not missing, f"registered ModelAdmins with no globex rows to try: {missing} (teach make_rows)"
    before = snapshot()
    wrong = {}
    for model in registry():
        for obj in rows.theirs[model]:
            found = try_every_view(client, model, obj, rows, superuser_request)
            if found:
                wrong[f"{model._meta.label} {obj.pk}"] = found
    after = snapshot()
    changed = {table for table in before if before[table] != after[table]} - {"django_session"}
    assert not changed, f"dave's requests changed {changed}"
    return wrong


TRIALS = [pytest.param(1, id="one-row-each"), pytest.param(12, id="12-rows-each", marks=pytest.mark.stress)]


@pytest.mark.parametrize("many", TRIALS)
def test_dave_never_sees_a_globex_row_in_any_view_of_any_model_admin(db, client, superuser_request, many):
    world = make_world()
    rows = make_rows(world, many)
    dave = staff(world.people.dave)
    client.force_login(dave)
    # dave reads his own tenant's rows there: the scoping hides globex, not everything.
    for model in registry():
        listed = client.get(url(model))
        assert listed.status_code == 200, f"{model._meta.label}: {listed.status_code}"
        for obj in rows.mine[model]:
            assert str(obj.pk) in shown_pks(listed), f"dave does not see his {model._meta.label} {obj.pk}"
            assert client.get(url(model, quote(str(obj.pk)), "change")).status_code == 200
    wrong = run_table(client, rows, superuser_request)
    assert wrong == {}, "dave reaches globex's rows through these admin views"


def test_another_tenants_object_is_404_like_one_that_does_not_exist(db, client):
    world = make_world()
    rows = make_rows(world, 1)
    client.force_login(staff(world.people.dave))
    for model in registry():
        for value in [str(obj.pk) for obj in rows.theirs[model]] + HOSTILE_IDS:
            for view in ("change", "history", "delete"):
                status = client.get(url(model, quote(value, safe="%"), view)).status_code
                assert status == 404, f"{model._meta.label} {view} {value[:40]!r}: {status}"
            posted = client.post(url(model), {"action": "delete_selected", "_selected_action": [value], "index": 0})
            assert posted.status_code in (200, 302), (
                f"{model._meta.label} action on {value[:40]!r}: {posted.status_code}"
            )


def test_the_history_of_his_own_row_shows_its_log_but_another_tenants_is_404(db, client):
    world = make_world()
    rows = make_rows(world, 1)
    root = User.objects.get(username="root")
    LogEntry.objects.log_actions(
        user_id=root.id, queryset=[world.parent], action_flag=CHANGE, change_message="acme note"
    )
    client.force_login(staff(world.people.dave))
    assert b"acme note" in client.get(url(Task, str(world.parent.id), "history")).content
    assert client.get(url(Task, str(world.other.id), "history")).status_code == 404
    assert rows.theirs[Task][0] == world.other


def test_a_superuser_reads_every_tenant_and_a_member_of_none_reads_nothing(db, client):
    world = make_world()
    rows = make_rows(world, 1)
    client.force_login(User.objects.get(username="root"))
    for model in registry():
        listed = shown_pks(client.get(url(model)))
        for obj in rows.theirs[model] + rows.mine[model]:
            assert str(obj.pk) in listed, f"the superuser does not see {model._meta.label} {obj.pk}"
    client.force_login(staff(User.objects.create_user("eve", "eve@example.com", "pw")))
    for model in registry():
        assert shown_pks(client.get(url(model))) == set(), f"eve, a member of no tenant, sees {model._meta.label} rows"
        for obj in rows.mine[model]:
            assert client.get(url(model, quote(str(obj.pk)), "change")).status_code == 404


def test_a_grant_action_on_a_globex_grant_is_refused_and_says_nothing_of_it(db, client):
    world = make_world()
    rows = make_rows(world, 1)
    theirs = rows.theirs[Grant][0]
    client.force_login(staff(world.people.dave))
    for action in ("revoke_grants", "narrow_grants"):
        preview = client.post(url(Grant), {"action": action, "_selected_action": [theirs.id], "index": 0})
        assert preview.status_code == 302, "no preview page for a grant dave does not read"
        done = client.post(
            url(Grant),
            {"action": action, "_selected_action": [theirs.id], "index": 0, "confirm": "yes", "reason": "mine now"},
            follow=True,
        )
        assert b"None of the selected grants was found." in done.content
        assert not re.search(rb"repo:globex", done.content)
    theirs.refresh_from_db()
    assert theirs.revoked_at is None and theirs.resource == "repo:globex/0/*"
    assert not AuditEvent.objects.filter(kind__in=["grant.revoked", "grant.narrowed"]).exists()
