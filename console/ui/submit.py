"""Submit a task: pick an agent, fill its input from its JSON Schema (or type JSON), an
optional idempotency key. A refusal (bad input naming each field, a full pool, a key
used for other input) keeps everything typed and says what is wrong, with its 4xx."""

from __future__ import annotations

import json

from django.shortcuts import redirect

from console.access import OPERATE_ACTION, acting, require
from console.ui.web import form_status, page, param, screen
from runtime.errors import InvalidInput, StewardError, UnknownAgent, UnknownPool
from runtime.limits.selectors import pool_usage_of
from runtime.tasks.selectors import agent_list
from runtime.tasks.services import input_parse, task_submit

SIMPLE = {"string", "integer", "number", "boolean"}


def fields_of(schema: dict | None) -> list[dict]:
    """The form fields for a schema whose properties are all plain values; [] (type
    JSON instead) for anything richer."""
    if not schema or schema.get("type") != "object":
        return []
    required = set(schema.get("required", ()))
    fields = []
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        if kind not in SIMPLE:
            return []
        fields.append(
            {
                "name": name,
                "type": kind,
                "title": title_of(name, prop.get("title")),
                "required": name in required,
                "default": prop.get("default"),
                "description": prop.get("description", ""),
                "min": prop.get("minimum", prop.get("exclusiveMinimum")),
                "max": prop.get("maximum", prop.get("exclusiveMaximum")),
                "maxlength": prop.get("maxLength"),
            }
        )
    return fields


ACRONYMS = {"api", "id", "json", "http", "https", "url", "uri", "ip", "ttl"}


def title_of(name: str, title: str | None) -> str:
    """A field's label: the schema's own title when someone wrote one, else its name in
    words (results_url: "Results URL"). pydantic fills every title in by title-casing
    the name ("Results Url"), so a title equal to that is taken as no title."""
    words = [w for w in name.replace("-", "_").split("_") if w]
    if title and title != " ".join(w.capitalize() for w in words):
        return title
    spoken = [w.upper() if w.lower() in ACRONYMS else w.lower() for w in words] or [name]
    return spoken[0][:1].upper() + spoken[0][1:] + "".join(" " + w for w in spoken[1:])


def input_from(post, fields: list[dict]):
    """The input: the JSON typed, if any; else the schema fields, typed by the schema."""
    text = (post.get("input") or "").strip()
    if text:
        try:
            return input_parse(text)
        except StewardError as exc:
            exc.details.setdefault("field", "input")
            raise
    value = {}
    for field in fields:
        raw = (post.get(f"in.{field['name']}") or "").strip()
        if field["type"] == "boolean":
            value[field["name"]] = post.get(f"in.{field['name']}") == "on"
            continue
        if raw == "":
            continue  # the schema's default applies, or its "required" says so
        if field["type"] == "integer":
            try:
                value[field["name"]] = int(raw)
            except ValueError:
                raise InvalidInput(f"{field['name']} must be a whole number", field=field["name"]) from None
        elif field["type"] == "number":
            try:
                value[field["name"]] = float(raw)
            except ValueError:
                raise InvalidInput(f"{field['name']} must be a number", field=field["name"]) from None
        else:
            value[field["name"]] = raw
    return value


@screen
def submit(request, principal):
    require(principal, OPERATE_ACTION)
    agents = agent_list()
    source = request.POST if request.method == "POST" else request.GET
    named = param(request, "agent", source)
    chosen = next((a for a in agents if a.name == named), None)
    if chosen is None and request.method != "POST":
        chosen = agents[0] if agents else None  # the form opens on the first agent
    # A POST names its agent: one not registered is refused, never replaced by another.
    fields = fields_of(chosen.input_schema) if chosen else []
    context = {
        "field_errors": {},
        "agents": agents,
        "chosen": chosen,
        "fields": fields,
        "typed": source,
        "error": None,
        # The pool's page exists once the pool does (made with its first task).
        "pool_made": bool(chosen) and pool_exists(chosen.pool),
        "schema_json": json.dumps(chosen.input_schema, indent=2) if chosen and chosen.input_schema else "",
    }
    if request.method == "POST":
        try:
            if chosen is None:
                if named:
                    raise UnknownAgent(
                        f"no agent is registered as {named[:200]!r}", agent=named[:200], known=[a.name for a in agents]
                    )
                raise InvalidInput("choose an agent", field="agent")
            value = input_from(request.POST, fields)
            with acting(principal):
                made = task_submit(
                    agent=chosen.name,
                    input=value,
                    tenant=principal.tenant,
                    owner=principal.actor,
                    actor=principal.actor,
                    idempotency_key=param(request, "idempotency_key", source),
                )
            return redirect("ui:task", made.task_id)
        except StewardError as exc:
            context["error"] = exc
            context["field_errors"] = field_errors(exc)
            return page(request, principal, "console/submit.html", context, status=form_status(exc), nav="tasks")
    template = "console/submit.html#agent-fields" if request.htmx else "console/submit.html"
    return page(request, principal, template, context, nav="tasks")


def field_errors(exc: StewardError) -> dict[str, str]:
    """Each failing field's message, to show beside it: the schema's (details.errors) or
    the form's own (details.field)."""
    found = {}
    for error in exc.details.get("errors") or []:
        if isinstance(error, dict) and error.get("loc"):
            found.setdefault(str(error["loc"][0]), str(error.get("msg", "invalid")))
    if exc.details.get("field"):
        found.setdefault(str(exc.details["field"]), exc.message)
    return found


def pool_exists(name: str) -> bool:
    try:
        pool_usage_of(name)
    except UnknownPool:
        return False
    return True
