"""The limits on JSON that callers hand in (docs/limits.md): depth, number range, string
content and size, for task input and operator receipts alike. A refusal has its own
stable code and comes before anything is written; what is accepted is stored and read
back unchanged. Parsing JSON text never raises RecursionError or a ValueError of
Python's own.
"""

from __future__ import annotations

import json
import time

import pytest
from django.conf import settings

from runtime import encoding
from runtime.effects.services import effect_resolve
from runtime.errors import InvalidInput, StewardError
from runtime.models import Effect, Task
from runtime.stops.services import task_stop
from runtime.tasks.services import task_submit
from tests.runtime.test_cli import ALICE, blocked_task_with_unknown_effect
from tests.snapshot import snapshot

LIMIT = settings.STEWARD["MAX_INPUT_BYTES"]


def nested(depth: int, leaf=0):
    """`depth` arrays, one inside the next, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def self_containing() -> list:
    loop: list = []
    loop.append(loop)
    return loop


@pytest.fixture
def unchanged(db):
    """Asserts, after the test, that no table changed."""
    before = snapshot()
    yield
    assert snapshot() == before


# --- task input, from Python ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ({"a": nested(64)}, "INPUT_TOO_DEEP"),  # 65 with the object around it
        ({"a": nested(980)}, "INPUT_TOO_DEEP"),  # the input that poisoned a worker (issue 5)
        ({"a": nested(100_000)}, "INPUT_TOO_DEEP"),  # past the recursion limit: json.dumps would raise
        ({"a": self_containing()}, "INPUT_TOO_DEEP"),
        ({"n": float("nan")}, "NUMBER_OUT_OF_RANGE"),
        ({"n": float("inf")}, "NUMBER_OUT_OF_RANGE"),
        ({"n": [float("-inf")]}, "NUMBER_OUT_OF_RANGE"),
        ({"n": 2**63}, "NUMBER_OUT_OF_RANGE"),
        ({"n": -(2**63) - 1}, "NUMBER_OUT_OF_RANGE"),
        ({"n": {"m": 10**5000}}, "NUMBER_OUT_OF_RANGE"),  # past the 4,300-digit limit
        ({"n": 1e19}, "NUMBER_OUT_OF_RANGE"),  # PostgreSQL would hand it back as a 20-digit integer
        ({"s": "x\x00y"}, "INVALID_STRING"),
        ({"k\x00": 1}, "INVALID_STRING"),
        ({"a": nested(10, {"deep": "\x00"})}, "INVALID_STRING"),
        ({"s": "\ud800"}, "INVALID_STRING"),
        ({"\udfff": 1}, "INVALID_STRING"),
        ({"s": "\\\x00"}, "INVALID_STRING"),  # a backslash, then NUL: encodes as \\\u0000
        ({"a": [0] * (LIMIT + 1)}, "INPUT_TOO_LARGE"),  # refused before its elements are all walked
    ],
    ids=[
        "depth-65",
        "depth-980",
        "depth-100k",
        "self-containing",
        "nan",
        "infinity",
        "minus-infinity",
        "int-2-63",
        "int-below-minus-2-63",
        "int-5000-digits",
        "float-1e19",
        "nul",
        "nul-in-key",
        "nul-deep",
        "lone-surrogate",
        "lone-surrogate-key",
        "backslash-nul",
        "too-many-elements",
    ],
)
def test_input_past_a_limit_is_refused_with_its_code_and_nothing_written(unchanged, value, code):
    with pytest.raises(InvalidInput if code != "INPUT_TOO_LARGE" else StewardError) as refused:
        task_submit(agent="t.steps", input=value, **ALICE)
    assert refused.value.code == code
    assert len(refused.value.message) < 300  # names the limit, does not echo the input


def test_the_980_deep_input_that_poisoned_a_worker_is_refused_at_submission(unchanged):
    with pytest.raises(InvalidInput) as refused:
        task_submit(agent="t.steps", input={"a": nested(980)}, **ALICE)
    assert refused.value.code == "INPUT_TOO_DEEP"
    assert refused.value.details == {"max_depth": encoding.MAX_DEPTH}


@pytest.mark.parametrize(
    "value",
    [
        {"n": 2**63 - 1, "m": -(2**63), "f": 9.2e18, "g": -1.5, "t": True, "z": None},
        {"a": nested(63)},  # exactly MAX_DEPTH with the object around it
        {"s": "\\u0000"},  # the six characters \u0000, not NUL
        {"s": "\\\\u0000"},
        {"emoji": "\U0001f980", "clé": "ü", "tab\tand\nnewline": "are fine in JSON"},
        {"s": "[" * 1000 + "{" * 1000},  # brackets in strings are not nesting
    ],
    ids=["number-bounds", "depth-64", "escaped-backslash-u", "two-backslashes", "unicode", "brackets-in-string"],
)
def test_input_at_the_limits_is_accepted_and_read_back_unchanged(db, value):
    sub = task_submit(agent="t.steps", input=value, **ALICE)
    assert Task.objects.get(id=sub.task_id).input == value


# --- JSON text, as the CLI (and the API) parse it --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("[" * 100_000, "INPUT_TOO_DEEP"),
        ('{"a": ' + "[" * 980 + "]" * 980 + "}", "INPUT_TOO_DEEP"),
        ('{"a": "' + "[" * 100 + '", "b": ' + "[" * 65 + "]" * 65 + "}", "INPUT_TOO_DEEP"),
        ('{"n": ' + "1" * 5000 + "}", "NUMBER_OUT_OF_RANGE"),
        ('{"n": NaN}', "NUMBER_OUT_OF_RANGE"),
        ('{"n": -Infinity}', "NUMBER_OUT_OF_RANGE"),
        (b'{"s": "caf\xe9"}', "INVALID_ENCODING"),
        (" " * (encoding.TEXT_SLACK * LIMIT + 1), "INPUT_TOO_LARGE"),
        (b" " * (encoding.TEXT_SLACK * LIMIT + 1), "INPUT_TOO_LARGE"),
        ('{"a": 1,}', "INVALID_INPUT"),
        ("", "INVALID_INPUT"),
    ],
    ids=[
        "open-brackets-100k",
        "depth-980",
        "depth-65-after-a-bracket-string",
        "digits",
        "nan",
        "minus-infinity",
        "latin1-bytes",
        "long-text",
        "long-bytes",
        "trailing-comma",
        "empty",
    ],
)
def test_json_text_past_a_limit_is_refused_with_its_code(text, code):
    with pytest.raises(InvalidInput if code != "INPUT_TOO_LARGE" else StewardError) as refused:
        encoding.parse(text, what="--input", limit=LIMIT)
    assert refused.value.code == code


def test_json_text_that_python_cannot_parse_is_refused_without_its_errors():
    """What the parser refuses above is what json.loads itself would crash on."""
    with pytest.raises(RecursionError):
        json.loads("[" * 100_000)
    with pytest.raises(ValueError, match="4300 digits"):
        json.loads("1" * 5000)
    for text in ("[" * 100_000, "1" * 5000):
        with pytest.raises(StewardError):
            encoding.parse(text, what="--input", limit=LIMIT)


def test_json_text_with_many_quotes_is_scanned_in_linear_time():
    """An unterminated string full of escaped quotes, plus enough brackets to need the
    depth scan: a naive string pattern would retry from every quote (quadratic)."""
    text = "[" * 100 + '"' + '\\"' * 100_000
    started = time.perf_counter()
    with pytest.raises(StewardError):
        encoding.parse(text, what="--input", limit=LIMIT)
    assert time.perf_counter() - started < 1.0


def test_a_file_may_start_with_a_utf8_byte_order_mark():
    assert encoding.parse(b'\xef\xbb\xbf{"n": 1}', what="--input", limit=LIMIT) == {"n": 1}


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = '{"s": "' + "[" * 5000 + '\\"' + "{" * 5000 + '"}'
    assert encoding.parse(text, what="--input", limit=LIMIT) == {"s": "[" * 5000 + '"' + "{" * 5000}


# --- operator receipts and notes ------------------------------------------------------------------


@pytest.fixture
def unknown_effect(db):
    _, effect = blocked_task_with_unknown_effect()
    return effect


@pytest.mark.parametrize(
    ("receipt", "code"),
    [
        ({"r": nested(980)}, "INPUT_TOO_DEEP"),
        ({"r": "\x00"}, "INVALID_STRING"),
        ({"r": 2**64}, "NUMBER_OUT_OF_RANGE"),
        ({"r": {1, 2}}, "INVALID_INPUT"),
        ({"r": "x" * settings.STEWARD["MAX_OUTPUT_BYTES"]}, "INPUT_TOO_LARGE"),
    ],
    ids=["deep", "nul", "number", "set", "too-large"],
)
def test_a_receipt_past_a_limit_is_refused_and_the_effect_stays_unknown(unknown_effect, receipt, code):
    before = snapshot()
    with pytest.raises(StewardError) as refused:
        effect_resolve(effect_id=unknown_effect.id, outcome="committed", actor="user:alice", receipt=receipt)
    assert refused.value.code == code
    assert snapshot() == before
    assert Effect.objects.get(id=unknown_effect.id).state == "unknown"


@pytest.mark.parametrize(
    ("reason", "code"),
    [("stop\x00", "INVALID_STRING"), ("\udc80", "INVALID_STRING"), ("r" * 2001, "INVALID_STRING")],
    ids=["nul", "surrogate", "over-long"],
)
def test_a_reason_that_cannot_be_stored_is_refused_before_the_cancel(db, reason, code):
    task_id = task_submit(agent="t.steps", input={}, **ALICE).task_id
    before = snapshot()
    with pytest.raises(StewardError) as refused:
        task_stop(task_id=task_id, actor="user:alice", reason=reason)
    assert refused.value.code == code
    assert snapshot() == before
