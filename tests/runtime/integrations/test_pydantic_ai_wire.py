"""In-process: StewardAgent's mapping between Pydantic AI's messages and the chat format
ctx.model speaks, and one run on a stand-in Context (no database, no worker): which ctx
calls a Pydantic AI run makes, in which order, and what a replay of their answers gives."""

from __future__ import annotations

import json
import threading

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from runtime import agents
from runtime.integrations.pydantic_ai import StewardAgent, idempotency_key, wire


def test_a_conversation_maps_to_chat_messages_and_back():
    messages = [
        ModelRequest(parts=[SystemPromptPart("be brief"), UserPromptPart("find cats")]),
        ModelResponse(parts=[TextPart("looking"), ToolCallPart("search", {"query": "cats"}, tool_call_id="c1")]),
        ModelRequest(
            parts=[
                ToolReturnPart("search", ["a cat"], tool_call_id="c1"),
                ToolReturnPart("search", "try again", tool_call_id="c2", outcome="retried"),
            ]
        ),
    ]
    chat = wire.to_chat(messages, "the instructions")
    assert [m["role"] for m in chat] == ["system", "system", "user", "assistant", "tool", "tool"]
    assert chat[0]["content"] == "the instructions" and chat[2]["content"] == "find cats"
    assert chat[3] == {
        "role": "assistant",
        "content": "looking",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"query":"cats"}'}}
        ],
    }
    assert chat[4]["tool_call_id"] == "c1" and json.loads(chat[4]["content"]) == ["a cat"]
    assert chat[5]["tool_call_id"] == "c2" and "try again" in chat[5]["content"]

    receipt = {
        "text": "",
        "id": "chatcmpl-1",
        "finish_reason": "tool_calls",
        "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "search", "arguments": '{"query":"dogs"}'}}
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }
    response = wire.from_receipt(receipt, "fake-1")
    (call,) = response.parts
    assert (call.tool_name, call.args_as_dict(), call.tool_call_id) == ("search", {"query": "dogs"}, "c9")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert (response.finish_reason, response.provider_response_id, response.model_name) == (
        "tool_call",
        "chatcmpl-1",
        "fake-1",
    )
    assert wire.from_receipt({"text": "done", "finish_reason": "stop"}, "fake-1").parts == [TextPart("done")]


class Reply:
    def __init__(self, receipt):
        self.receipt = receipt


class StandIn:
    """The ctx calls a StewardAgent makes, recorded, answered as the fake model would
    (a call of the first tool until a tool answered, then text), replayed from `journal`
    when given one: what a later attempt would see."""

    def __init__(self, journal=None):
        self.calls: list[tuple] = []
        self.journal = list(journal or [])
        self.outputs: list = []
        self.threads: set[int] = set()

    def _answer(self, kind, name, run):
        self.threads.add(threading.get_ident())
        self.calls.append((kind, name))
        value = self.journal.pop(0) if self.journal else run()
        self.outputs.append(value)
        return value

    def model(self, messages, *, model, **params):
        def run():
            said = [m for m in messages if m["role"] == "tool"]
            if params.get("tools") and not said:
                fn = params["tools"][0]["function"]
                arguments = json.dumps(dict.fromkeys(fn["parameters"]["properties"], "q"))  # "q" for each
                call = {"id": "c1", "type": "function", "function": {"name": fn["name"], "arguments": arguments}}
                return {"text": "", "tool_calls": [call], "finish_reason": "tool_calls"}
            return {"text": f"tool said: {said[-1]['content']}" if said else "hello", "finish_reason": "stop"}

        return Reply(self._answer("model", f"model:{model}", run))

    def step(self, name, fn, *args, **kwargs):
        return self._answer("step", name, lambda: fn(*args, **kwargs))

    def effect(self, name, fn, *args, effect_class, key=None, keyed=False, requires=None, **kwargs):
        self.effect_options = {"effect_class": effect_class, "key": key, "requires": requires}
        return self._answer("effect", name, lambda: fn(*args, idempotency_key="k-1", **kwargs))


@pytest.fixture
def registered():
    before, versions = dict(agents._registry), dict(agents._versions)
    yield
    agents._registry.clear()
    agents._registry.update(before)
    agents._versions.clear()
    agents._versions.update(versions)


def research_agent(tool_runs: list):
    plain = Agent("openai:fake-1", instructions="Answer from the search.", defer_model_check=True)

    @plain.tool_plain
    def search(query: str) -> list[str]:
        """Search the notes."""
        tool_runs.append((query, idempotency_key()))
        return [f"a note about {query}"]

    return plain


def test_a_run_is_one_model_call_one_tool_step_one_model_call_all_on_the_attempts_thread(registered):
    runs: list = []
    durable = StewardAgent(research_agent(runs), name="t.pa.wire", pool="research")
    ctx = StandIn()
    assert durable.run(ctx, {"prompt": "cats?"}) == 'tool said: ["a note about q"]'
    assert ctx.calls == [("model", "model:fake-1"), ("step", "tool:search"), ("model", "model:fake-1")]
    assert runs == [("q", None)]
    assert ctx.threads == {threading.get_ident()}  # every ctx call on the caller's (the attempt's) thread
    # The tool's answer is journaled as untrusted data.
    assert ctx.outputs[1] == {"untrusted": True, "source": "tool:search", "value": ["a note about q"]}
    assert agents.get("t.pa.wire").pool == "research"

    # A replay of that journal runs neither the model nor the tool, and ends the same.
    replay = StandIn(journal=ctx.outputs)
    assert durable.run(replay, {"prompt": "cats?"}) == 'tool said: ["a note about q"]'
    assert runs == [("q", None)]


def test_a_tool_declared_an_effect_goes_through_ctx_effect_with_its_key(registered):
    runs: list = []
    durable = StewardAgent(
        research_agent(runs),
        name="t.pa.effect",
        effects={"search": {"effect_class": "idempotent", "key": lambda args: f"search:{args['query']}"}},
    )
    ctx = StandIn()
    durable.run(ctx, {"prompt": "cats?"})
    assert ctx.calls[1] == ("effect", "tool:search")
    assert ctx.effect_options == {"effect_class": "idempotent", "key": "search:q", "requires": None}
    assert runs == [("q", "k-1")]


def test_a_tools_model_retry_is_journaled_as_an_answer_and_asks_the_model_again(registered):
    plain = Agent("openai:fake-1", defer_model_check=True)
    tries = []

    @plain.tool_plain
    def search(query: str) -> str:
        tries.append(query)
        if len(tries) == 1:
            raise ModelRetry("no results, widen the query")
        return "found"

    ctx = StandIn()
    ctx.model = _retrying_model(ctx)
    StewardAgent(plain, name="t.pa.retry").run(ctx, {"prompt": "cats?"})
    assert ctx.outputs[1] == {"retry": "no results, widen the query"}
    assert [c[0] for c in ctx.calls] == ["model", "step", "model", "step", "model"]


def _retrying_model(ctx):
    def model(messages, *, model, **params):
        def run():
            said = [m for m in messages if m["role"] == "tool"]
            if len(said) < 2:
                call = {
                    "id": f"c{len(said)}",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"query": "q"}'},
                }
                return {"text": "", "tool_calls": [call], "finish_reason": "tool_calls"}
            return {"text": "done", "finish_reason": "stop"}

        return Reply(ctx._answer("model", f"model:{model}", run))

    return model


class Answer(BaseModel):
    summary: str
    sources: int


def test_a_structured_output_is_returned_dumped(registered):
    plain = Agent("openai:fake-1", output_type=Answer, defer_model_check=True)
    ctx = StandIn()

    def model(messages, *, model, **params):
        (tool,) = params["tools"]  # the output tool, and the run must end in it
        assert params["tool_choice"] == "required"
        name = tool["function"]["name"]
        call = {
            "id": "o1",
            "type": "function",
            "function": {"name": name, "arguments": '{"summary": "s", "sources": 2}'},
        }
        return Reply(ctx._answer("model", "model:fake-1", lambda: {"text": "", "tool_calls": [call]}))

    ctx.model = model
    assert StewardAgent(plain, name="t.pa.output").run(ctx, {"prompt": "sum up"}) == {"summary": "s", "sources": 2}
    assert ctx.calls == [("model", "model:fake-1")]  # the output tool is not a step


def test_a_ctx_call_that_raises_ends_the_run_with_that_error(registered):
    class Stop(BaseException):
        pass

    ctx = StandIn()

    def step(name, fn, *args, **kwargs):
        raise Stop("stopped")

    ctx.step = step
    with pytest.raises(Stop):
        StewardAgent(research_agent([]), name="t.pa.stop").run(ctx, {"prompt": "cats?"})


def test_effects_must_name_their_class():
    with pytest.raises(ValueError, match="effect_class"):
        StewardAgent(research_agent([]), name="t.pa.bad", effects={"search": {"key": "k"}})


class Decided:
    def __init__(self, state: str, comment: str = ""):
        self.approved, self.expired, self.stale = state == "approved", state == "expired", state == "stale"
        self.comment = comment


def approval_agent(runs: list):
    plain = Agent("openai:fake-1", defer_model_check=True)

    @plain.tool_plain(requires_approval=True)
    def send_report(report: str) -> str:
        """Send the report to the team."""
        runs.append(report)
        return "sent"

    return plain


@pytest.mark.parametrize(
    ("decision", "ran", "told"),
    [
        ("approved", ["q"], "tool said: sent"),
        ("denied", [], "tool said: A person's approval of this call was denied: not today. It was not run."),
        ("expired", [], "tool said: A person's approval of this call expired: not today. It was not run."),
    ],
)
def test_a_tool_that_requires_approval_asks_through_ctx_and_runs_only_once_approved(registered, decision, ran, told):
    runs: list = []
    ctx = StandIn()
    asked = []

    def request_approvals(specs, *, name):
        asked.append((specs, name))
        ctx.calls.append(("approval", name))
        return [Decided(decision, "not today")]

    ctx.request_approvals = request_approvals
    durable = StewardAgent(
        approval_agent(runs), name="t.pa.wire.approve", effects={"send_report": {"effect_class": "irreversible"}}
    )
    assert durable.run(ctx, {"prompt": "cats?"}) == told
    ((specs, name),) = asked
    assert name == "approve:send_report"
    assert specs == [
        {
            "action": {"tool": "send_report", "arguments": {"report": "q"}},
            "effect_class": "irreversible",
            "expires_in": 24 * 3600,
            "requires": None,
        }
    ]
    assert runs == ran
    sent = [("effect", "tool:send_report")] if ran else []
    assert ctx.calls == [
        ("model", "model:fake-1"),
        ("approval", "approve:send_report"),
        *sent,
        ("model", "model:fake-1"),
    ]


def test_with_an_event_stream_handler_each_request_streams_through_ctx_and_the_handler_sees_the_reply(registered):
    seen: list = []

    async def handler(run_context, events):
        async for event in events:
            seen.append(type(event).__name__)

    runs: list = []
    durable = StewardAgent(research_agent(runs), name="t.pa.wire.stream", event_stream_handler=handler)
    ctx = StandIn()
    streamed = []
    model = ctx.model

    def streaming(messages, **params):
        streamed.append(params.get("stream"))
        return model(messages, **params)

    ctx.model = streaming
    assert durable.run(ctx, {"prompt": "cats?"}) == 'tool said: ["a note about q"]'
    assert streamed == [True, True] and runs == [("q", None)]
    assert ctx.calls == [("model", "model:fake-1"), ("step", "tool:search"), ("model", "model:fake-1")]
    assert "PartStartEvent" in seen and "FunctionToolCallEvent" in seen and "FunctionToolResultEvent" in seen
