"""Memory kinds and agents the memory tests share (registered on import)."""

from __future__ import annotations

import collections

from pydantic import BaseModel

from runtime.agents import agent
from runtime.errors import StewardError
from runtime.memory.kinds import memory_kind, memory_upgrade
from runtime.taint import UntrustedText

calls = collections.Counter()


@memory_kind("test_note", version=1)
class Note(BaseModel):
    text: str
    tags: list[str] = []


@memory_kind("test_profile", version=2)
class Profile(BaseModel):
    first: str
    last: str


@memory_upgrade("test_profile", from_version=1)
def split_name(payload: dict) -> dict:
    calls["upgrade"] += 1
    first, _, last = payload["name"].partition(" ")
    return {"first": first, "last": last}


@agent("memory.writer")
def writer(ctx, input):
    """Writes input["text"] as the note input["key"]; model=True writes it as a model's
    reply. Without "text", reads the note as memory.reader does (its own memory)."""
    if "text" not in input:
        return reader(ctx, input)
    text = input["text"]
    if input.get("model"):
        text = UntrustedText(text, source="model:test", receipt={})
    written = ctx.memory.put(
        "test_note",
        input["key"],
        {"text": text},
        expected_version=input.get("expected"),
        ttl=input.get("ttl"),
        source=input.get("source"),
    )
    calls["after_put"] += 1
    return {"won": written.won, "version": written.version, "current": written.current}


@agent("memory.reader")
def reader(ctx, input):
    found = ctx.memory.get(input.get("kind", "test_note"), input["key"])
    if found is None:
        return {"found": None}
    return {
        "found": found.value.model_dump(),
        "version": found.version,
        "untrusted": found.untrusted,
        "source": found.source,
        "text_is_untrusted": getattr(getattr(found.value, "text", None), "untrusted", False),
    }


@agent("memory.writer.other")
def other_writer(ctx, input):
    return {"found": ctx.memory.get("test_note", input["key"]) is not None}


@agent("memory.authority")
def authority(ctx, input):
    """Reads a note and offers its text as the resource an effect requires."""
    found = ctx.memory.get("test_note", input["key"])
    try:
        ctx.effect(
            "send", lambda idempotency_key: "sent", effect_class="idempotent", requires=("mail.send", found.value.text)
        )
    except StewardError as exc:
        return {"refused": exc.code}
    return {"refused": None}


@agent("memory.quote")
def quote(ctx, input):
    """Quotes a note in an approval's action."""
    found = ctx.memory.get("test_note", input["key"])
    ctx.request_approval({"op": "mail", "body": found.value.text}, effect_class="irreversible", expires_in=600)
    return {}


@agent("memory.spender")
def spender(ctx, input):
    return {
        "receipt": ctx.effect(
            "pay", lambda idempotency_key: f"paid-{idempotency_key[-4:]}", effect_class="irreversible"
        )
    }


def _deep(levels: int):
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


# Values a task's input could not carry (its own limits refuse them at submission): built here.
MADE = {
    "huge": lambda: {"text": "a" * 2_000_000},
    "deep": lambda: {"text": "x", "tags": _deep(200)},
    "nul": lambda: {"text": "a\u0000b"},
    "surrogate": lambda: {"text": "a\ud800b"},
}


@agent("memory.hostile")
def hostile(ctx, input):
    """Puts input["value"] (or the MADE value input["make"] names) under input["key"] with
    input's options; returns the refusal's code."""
    value = MADE[input["make"]]() if "make" in input else input["value"]
    try:
        ctx.memory.put(input.get("kind", "test_note"), input["key"], value, **input.get("options", {}))
    except StewardError as exc:
        return {"refused": exc.code}
    return {"refused": None}
