"""Hostile ctx.memory calls: each is refused with a stable code before it takes a journal
seq, so nothing is written and the agent (which may catch it) goes on deterministically."""

from __future__ import annotations

import pytest

from runtime.models import MemoryRecord, Step
from runtime.testing import StewardTestEnv
from tests.runtime.memory import kinds  # noqa: F401  (declares the kinds and agents)

pytestmark = pytest.mark.django_db

# (name, key, value, options, code)
HOSTILE = [
    ("huge-value", "k", {"make": "huge"}, {}, "MEMORY_VALUE_INVALID"),
    ("deep-value", "k", {"make": "deep"}, {}, "MEMORY_VALUE_INVALID"),
    ("malformed-value", "k", {"txet": "x"}, {}, "MEMORY_VALUE_INVALID"),
    ("not-an-object", "k", "just text", {}, "MEMORY_VALUE_INVALID"),
    ("nul-in-text", "k", {"make": "nul"}, {}, "MEMORY_VALUE_INVALID"),
    ("lone-surrogate", "k", {"make": "surrogate"}, {}, "MEMORY_VALUE_INVALID"),
    ("huge-key", "k" * 201, {"text": "x"}, {}, "INVALID_INPUT"),
    ("slash-in-key", "a/b", {"text": "x"}, {}, "INVALID_INPUT"),
    ("control-in-key", "a\u0007b", {"text": "x"}, {}, "INVALID_INPUT"),
    ("unknown-kind", "k", {"text": "x"}, {"kind": "no_such_kind"}, "MEMORY_KIND_UNKNOWN"),
    ("negative-ttl", "k", {"text": "x"}, {"ttl": -1}, "INVALID_ARGUMENT"),
    ("ttl-past-its-bound", "k", {"text": "x"}, {"ttl": 10**12}, "INVALID_ARGUMENT"),
    ("expected-negative", "k", {"text": "x"}, {"expected_version": -1}, "INVALID_ARGUMENT"),
    ("expected-past-int32", "k", {"text": "x"}, {"expected_version": 2**40}, "INVALID_ARGUMENT"),
    ("expected-a-string", "k", {"text": "x"}, {"expected_version": "1"}, "INVALID_ARGUMENT"),
    ("as-a-person", "k", {"text": "x"}, {"source": "person"}, "INVALID_ARGUMENT"),
]


@pytest.mark.parametrize(("key", "value", "options", "code"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_hostile_memory_write_is_refused_with_a_stable_code_and_writes_nothing(key, value, options, code):
    kind = options.pop("kind", "test_note")
    with StewardTestEnv() as env:
        made = value if "make" in value else {"value": value}
        task = env.submit("memory.hostile", {"key": key, "kind": kind, "options": options, **made})
        env.run_until_idle()
        assert env.result(task).output == {"refused": code}
    assert MemoryRecord.objects.count() == 0
    assert not Step.objects.filter(task_id=task, kind="memory").exists()
