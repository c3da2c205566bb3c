"""Submitting tasks: bad input gets a clear, stable error and writes nothing; a caller
key makes a submit idempotent, under concurrency too, and never revives a cancelled task.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pydantic
import pytest
from django.conf import settings

from runtime import agents, states
from runtime.errors import (
    IdempotencyConflict,
    InputTooLarge,
    InvalidIdentifier,
    InvalidInput,
    QueueFull,
    TaskNotFound,
    UnknownAgent,
)
from runtime.limits.services import pool_create
from runtime.models import AuditEvent, Pool, Task
from runtime.stops.services import task_stop
from runtime.tasks.selectors import task_detail
from runtime.tasks.services import Submission, task_resume, task_submit, validate_input
from tests.harness import race

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
CAROL = {"tenant": "globex", "owner": "user:carol", "actor": "user:carol"}
RACE_TRIALS = 20
RACERS = 10


def written() -> tuple[int, int, int]:
    return Task.objects.count(), AuditEvent.objects.count(), Pool.objects.count()


@pytest.fixture
def nothing_written(db):
    """Asserts, after the test, that it created no Task, AuditEvent or Pool row."""
    before = written()
    yield
    assert written() == before


# --- refused input ---------------------------------------------------------------------


def test_an_unknown_agent_is_refused_with_unknown_agent(nothing_written):
    with pytest.raises(UnknownAgent) as refused:
        task_submit(agent="no.such.agent", input={}, **ALICE)
    assert refused.value.code == "UNKNOWN_AGENT"
    assert refused.value.details["agent"] == "no.such.agent"
    assert "t.steps" in refused.value.details["known"]


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ([1, 2], "must be a JSON object, got list"),
        ("{}", "must be a JSON object, got str"),
        (None, "must be a JSON object, got NoneType"),
        (42, "must be a JSON object, got int"),
        ({"tags": {"a", "b"}}, "not plain JSON"),
        ({"thing": Opaque()}, "not plain JSON"),
        ({(1, 2): "tuple key"}, "not plain JSON"),
        ({1: "int key", "b": "str key"}, "not plain JSON"),
        ({1: "int key"}, "keys must be strings"),  # JSON would turn it into "1": not what was given
        ({"deep": {None: 1}}, "keys must be strings"),
    ],
    ids=["list", "string", "none", "number", "set", "object", "tuple-key", "mixed-keys", "int-key", "none-key"],
)
def test_input_that_is_not_a_plain_json_object_is_refused_with_invalid_input(nothing_written, value, says):
    with pytest.raises(InvalidInput) as refused:
        task_submit(agent="t.steps", input=value, **ALICE)
    assert refused.value.code == "INVALID_INPUT"
    assert says in refused.value.message


@pytest.mark.parametrize(
    ("identity", "field", "max_length"),
    [
        ({"tenant": ""}, "tenant", 100),
        ({"owner": ""}, "owner", 200),
        ({"actor": ""}, "actor", 200),
        ({"tenant": "x" * 101}, "tenant", 100),
        ({"owner": "o" * 201}, "owner", 200),
        ({"actor": "a" * 201}, "actor", 200),
        ({"tenant": "acme\x00"}, "tenant", 100),
        ({"owner": "user:alice\nuser:root"}, "owner", 200),
        ({"actor": "user:\ud800"}, "actor", 200),
        ({"tenant": 7}, "tenant", 100),
        ({"idempotency_key": ""}, "idempotency_key", 200),
        ({"idempotency_key": "k" * 201}, "idempotency_key", 200),
        ({"agent": "a" * 201}, "agent", 200),
        ({"pool": "bad pool!"}, "pool", 100),
        ({"pool": "p" * 101}, "pool", 100),
        ({"pool": ""}, "pool", 100),
    ],
    ids=[
        "empty-tenant",
        "empty-owner",
        "empty-actor",
        "long-tenant",
        "long-owner",
        "long-actor",
        "nul-tenant",
        "newline-owner",
        "surrogate-actor",
        "int-tenant",
        "empty-key",
        "long-key",
        "long-agent",
        "bad-pool",
        "long-pool",
        "empty-pool",
    ],
)
def test_an_identifier_that_does_not_fit_its_column_is_refused_with_invalid_identifier(
    nothing_written, identity, field, max_length
):
    with pytest.raises(InvalidIdentifier) as refused:
        task_submit(**{"agent": "t.steps", "input": {}, **ALICE, **identity})
    assert refused.value.code == "INVALID_IDENTIFIER"
    assert refused.value.details == {"field": field, "max_length": max_length}


def test_identifiers_at_their_column_length_are_accepted(db):
    sub = task_submit(
        agent="t.steps", input={}, tenant="t" * 100, owner="o" * 200, actor="a" * 200, idempotency_key="k" * 200
    )
    task = Task.objects.get(id=sub.task_id)
    assert (task.tenant, task.owner, task.idempotency_key) == ("t" * 100, "o" * 200, "k" * 200)
    assert AuditEvent.objects.get(task_id=task.id, kind="task.submitted").actor == "a" * 200


def blob(size: int, char: str = "x") -> dict:
    """An input whose canonical JSON, {"blob":"..."}, is exactly `size` bytes."""
    overhead = len('{"blob":""}')
    assert (size - overhead) % len(char.encode()) == 0
    return {"blob": char * ((size - overhead) // len(char.encode()))}


def test_input_past_max_input_bytes_is_refused_with_input_too_large(nothing_written):
    limit = settings.STEWARD["MAX_INPUT_BYTES"]
    with pytest.raises(InputTooLarge) as refused:
        task_submit(agent="t.steps", input=blob(limit + 1), **ALICE)
    assert refused.value.code == "INPUT_TOO_LARGE"
    assert refused.value.details == {"limit": limit}
    assert str(limit) in refused.value.message


def test_the_input_limit_counts_bytes_not_characters(nothing_written):
    limit = settings.STEWARD["MAX_INPUT_BYTES"]
    two_byte = blob(limit + 1 if (limit - 11) % 2 else limit + 2, "é")  # fewer characters than the limit
    assert len('{"blob":""}') + len(two_byte["blob"]) < limit
    with pytest.raises(InputTooLarge):
        task_submit(agent="t.steps", input=two_byte, **ALICE)


def test_input_of_exactly_max_input_bytes_is_accepted(db):
    limit = settings.STEWARD["MAX_INPUT_BYTES"]
    sub = task_submit(agent="t.steps", input=blob(limit), **ALICE)
    assert sub.created and Task.objects.get(id=sub.task_id).input == blob(limit)


def test_input_that_breaks_an_agents_schema_is_refused_with_the_schema_errors(nothing_written):
    with pytest.raises(InvalidInput) as refused:
        task_submit(agent="research.batch", input={"question": "", "experiments": 99}, **ALICE)
    assert refused.value.code == "INVALID_INPUT"
    assert "research.batch" in refused.value.message
    problems = {tuple(e["loc"]): e["type"] for e in refused.value.details["errors"]}
    assert problems == {("question",): "string_too_short", ("experiments",): "less_than_equal"}


def test_a_schema_refusal_names_each_failing_field_and_why(nothing_written):
    with pytest.raises(InvalidInput) as refused:
        task_submit(agent="research.batch", input={"question": "", "experiments": 99}, **ALICE)
    assert refused.value.message == (
        "input does not match research.batch's schema: "
        "question: String should have at least 1 character; "
        "experiments: Input should be less than or equal to 20"
    )

    with pytest.raises(InvalidInput) as refused:
        task_submit(agent="notify.send", input={"to": "oncall@example.com"}, **ALICE)
    assert refused.value.message == "input does not match notify.send's schema: message: Field required"


class Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    counts: list[int] = []


STRICT = agents.AgentSpec(name="t.strict", fn=lambda ctx, input: None, pool=None, description="", input_model=Strict)


def test_a_schema_refusal_names_nested_fields_escapes_hostile_names_and_stops_at_ten():
    with pytest.raises(InvalidInput) as refused:
        validate_input(STRICT, {"counts": [1, "two"], "oops\x1b[2J": 1})
    assert refused.value.message == (
        "input does not match t.strict's schema: "
        "counts.1: Input should be a valid integer, unable to parse string as an integer; "
        "'oops\\x1b[2J': Extra inputs are not permitted"
    )

    with pytest.raises(InvalidInput) as refused:
        validate_input(STRICT, {"counts": ["x"] * 25})
    problems = refused.value.message.split(": ", 1)[1].split("; ")
    assert len(problems) == 11 and problems[-1] == "and 15 more (details.errors)"
    assert len(refused.value.details["errors"]) == 25


def test_input_that_fits_an_agents_schema_is_accepted(db):
    sub = task_submit(agent="research.batch", input={"question": "why?", "experiments": 2}, **ALICE)
    assert Task.objects.get(id=sub.task_id).pool_id == "research"


@pytest.mark.parametrize("task_id", [uuid.uuid4(), "not-a-uuid"], ids=["unknown-uuid", "malformed"])
def test_show_cancel_and_resume_of_an_unknown_task_are_refused_with_task_not_found(nothing_written, task_id):
    for act in (
        lambda: task_detail(task_id),
        lambda: task_stop(task_id=task_id, actor="user:alice", reason="test"),
        lambda: task_resume(task_id=task_id, actor="user:alice"),
    ):
        with pytest.raises(TaskNotFound) as refused:
            act()
        assert refused.value.code == "TASK_NOT_FOUND"
        assert refused.value.status == 404


# --- idempotent create ---------------------------------------------------------------------


def test_the_same_key_and_input_return_the_same_task(db):
    first = task_submit(agent="t.steps", input={"n": 2, "label": "x"}, idempotency_key="k1", **ALICE)
    before = written()
    # Key order does not matter: the input is compared in canonical form.
    again = task_submit(agent="t.steps", input={"label": "x", "n": 2}, idempotency_key="k1", **ALICE)

    assert first == Submission(first.task_id, True, states.QUEUED)
    assert again == Submission(first.task_id, False, states.QUEUED)
    assert written() == before


@pytest.mark.parametrize(
    ("agent", "input"), [("t.steps", {"n": 3}), ("t.child", {"n": 2})], ids=["other-input", "other-agent"]
)
def test_the_same_key_with_another_input_or_agent_is_refused_with_idempotency_conflict(db, agent, input):
    first = task_submit(agent="t.steps", input={"n": 2}, idempotency_key="k1", **ALICE)
    before = written()
    with pytest.raises(IdempotencyConflict) as refused:
        task_submit(agent=agent, input=input, idempotency_key="k1", **ALICE)
    assert refused.value.code == "IDEMPOTENCY_CONFLICT"
    assert refused.value.details == {"task_id": str(first.task_id)}
    assert written() == before
    assert Task.objects.get(id=first.task_id).input == {"n": 2}


def test_keys_belong_to_a_tenant(db):
    alices = task_submit(agent="t.steps", input={"n": 2}, idempotency_key="shared", **ALICE)
    carols = task_submit(agent="t.steps", input={"n": 2}, idempotency_key="shared", **CAROL)
    assert carols.created and carols.task_id != alices.task_id
    assert Task.objects.get(id=carols.task_id).tenant == "globex"


def test_resubmitting_the_key_of_a_cancelled_task_returns_it_still_cancelled(db):
    first = task_submit(agent="t.steps", input={"n": 2}, idempotency_key="k1", **ALICE)
    task_stop(task_id=first.task_id, actor="user:alice", reason="changed my mind")
    before = written()

    again = task_submit(agent="t.steps", input={"n": 2}, idempotency_key="k1", **ALICE)

    assert again == Submission(first.task_id, False, states.CANCELLED)
    assert Task.objects.get(id=first.task_id).status == states.CANCELLED
    assert written() == before  # no new task, and no audit row that could read as a resume


def test_a_known_key_returns_its_task_even_when_the_pool_is_full(db):
    pool_create(actor="user:alice", name="tiny", max_running=1, max_queued=0)
    first = task_submit(agent="t.steps", input={}, idempotency_key="k1", pool="tiny", **ALICE)
    with pytest.raises(QueueFull):
        task_submit(agent="t.steps", input={}, idempotency_key="k2", pool="tiny", **ALICE)
    assert task_submit(agent="t.steps", input={}, idempotency_key="k1", pool="tiny", **ALICE) == Submission(
        first.task_id, False, states.QUEUED
    )


# --- the race ----------------------------------------------------------------------------------


def test_concurrent_submits_with_one_key_make_exactly_one_task(live):
    """Ten threads submit the same key at once, twenty times. Even trials go through one
    pool; odd trials split the racers over two pools, so the pool lock cannot serialise
    them and only the unique key decides."""
    for name in ("default", "other"):
        pool_create(name=name, max_running=50, max_queued=10_000, actor="user:alice")
    outcomes = Counter()
    for trial in range(RACE_TRIALS):
        key = f"race-{trial}"
        pools = ["default"] if trial % 2 == 0 else ["default", "other"]

        results = race(
            RACERS,
            lambda i: task_submit(
                agent="t.steps", input={"n": 1}, idempotency_key=key, pool=pools[i % len(pools)], **ALICE
            ),
        )

        errors = [r for r in results if not isinstance(r, Submission)]
        assert not errors, errors
        outcomes.update("created" if r.created else "found" for r in results)
        assert sum(r.created for r in results) == 1, results
        assert len({r.task_id for r in results}) == 1
        (task,) = Task.objects.filter(tenant="acme", idempotency_key=key)
        assert task.id == results[0].task_id
        assert AuditEvent.objects.filter(task_id=task.id, kind="task.submitted").count() == 1

    print(f"\none-key submit race, {RACE_TRIALS} trials x {RACERS} threads: {dict(outcomes)}")
    assert outcomes == Counter(created=RACE_TRIALS, found=RACE_TRIALS * (RACERS - 1))
    assert Task.objects.count() == RACE_TRIALS
    assert AuditEvent.objects.filter(kind="task.submitted").count() == RACE_TRIALS
