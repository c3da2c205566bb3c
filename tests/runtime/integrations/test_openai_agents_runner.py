"""In-process: StewardRunner on a stand-in Context (no database, no worker): which ctx
calls an OpenAI Agents SDK run makes, in which order, what the gateway is asked, what a
replay of their answers gives, and how an approval resumes the SDK's interrupted run."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from agents import Agent, function_tool
from pydantic import BaseModel

from runtime.integrations.openai_agents import StewardRunner, idempotency_key
from tests.runtime.integrations.test_pydantic_ai_wire import StandIn


def briefer(runs: list, *, needs_approval: bool = False) -> Agent:
    @function_tool(needs_approval=needs_approval)
    def search(query: str) -> list[str]:
        """Search the notes."""
        runs.append((query, idempotency_key()))
        return [f"a note about {query}"]

    return Agent(name="briefer", instructions="Answer from the search.", model="fake-1", tools=[search])


class Recording(StandIn):
    def __init__(self, journal=None, decisions=None):
        super().__init__(journal)
        self.requests: list = []
        self.decisions = list(decisions or [])
        self.packages: list = []

    def model(self, messages, *, model, **params):
        self.requests.append({"messages": messages, **params})
        return super().model(messages, model=model, **params)

    def request_approvals(self, specs, *, name):
        self.threads.add(threading.get_ident())
        self.calls.append(("approval", name))
        self.packages.append(specs)
        return [self.decisions.pop(0) for _ in specs]


def test_a_run_is_one_model_call_one_tool_step_one_model_call_all_on_the_attempts_thread():
    runs: list = []
    agent = briefer(runs)
    ctx = Recording()
    result = StewardRunner.run_sync(agent, "cats?", ctx=ctx)
    assert result.final_output == "tool said: ['a note about q']"
    assert ctx.calls == [("model", "model:fake-1"), ("step", "tool:search"), ("model", "model:fake-1")]
    assert ctx.threads == {threading.get_ident()}
    assert runs == [("q", None)]
    assert ctx.outputs[1] == {"untrusted": True, "source": "tool:search", "value": ["a note about q"]}
    # What the gateway was asked is the SDK's chat-completions mapping.
    first, second = ctx.requests
    assert first["messages"] == [
        {"role": "system", "content": "Answer from the search."},
        {"role": "user", "content": "cats?"},
    ]
    assert first["tools"][0]["function"]["name"] == "search"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "['a note about q']"}
    # A replay of that journal runs neither the model nor the tool, and ends the same.
    replay = Recording(journal=ctx.outputs)
    again = StewardRunner.run_sync(agent, "cats?", ctx=replay)
    assert again.final_output == result.final_output and runs == [("q", None)]


def test_a_tool_declared_an_effect_goes_through_ctx_effect_with_its_key():
    runs: list = []
    ctx = Recording()
    StewardRunner.run_sync(
        briefer(runs),
        "cats?",
        ctx=ctx,
        effects={"search": {"effect_class": "idempotent", "key": lambda args: f"search:{args['query']}"}},
    )
    assert ctx.calls[1] == ("effect", "tool:search")
    assert ctx.effect_options == {"effect_class": "idempotent", "key": "search:q", "requires": None}
    assert runs == [("q", "k-1")]


class Brief(BaseModel):
    topic: str
    notes: int


def test_structured_output_is_asked_with_the_sdks_response_format_and_parsed():
    ctx = Recording()
    agent = Agent(name="brief", model="fake-1", output_type=Brief)
    ctx.model = lambda messages, *, model, **params: (
        ctx.requests.append(params) or SimpleNamespace(receipt={"text": '{"topic": "cats", "notes": 2}'})
    )
    result = StewardRunner.run_sync(agent, "cats?", ctx=ctx)
    assert result.final_output == Brief(topic="cats", notes=2)
    assert StewardRunner.output(result) == {"topic": "cats", "notes": 2}
    assert ctx.requests[0]["response_format"]["type"] == "json_schema"


def decision(approved: bool, **kw):
    return SimpleNamespace(approved=approved, expired=False, stale=False, comment="", **kw)


def test_a_tool_that_needs_approval_becomes_a_package_and_the_run_resumes_with_the_decision():
    runs: list = []
    ctx = Recording(decisions=[decision(True)])
    result = StewardRunner.run_sync(briefer(runs, needs_approval=True), "cats?", ctx=ctx)
    assert ctx.calls == [
        ("model", "model:fake-1"),
        ("approval", "approve:search"),
        ("step", "tool:search"),
        ("model", "model:fake-1"),
    ]
    (package,) = ctx.packages
    assert package[0]["action"] == {"tool": "search", "arguments": {"query": "q"}}
    assert package[0]["effect_class"] == "irreversible"
    assert runs == [("q", None)] and result.final_output == "tool said: ['a note about q']"


def test_a_rejected_tool_never_runs_and_the_model_is_told():
    runs: list = []
    ctx = Recording(decisions=[SimpleNamespace(approved=False, expired=True, stale=False, comment="")])
    result = StewardRunner.run_sync(briefer(runs, needs_approval=True), "cats?", ctx=ctx)
    assert runs == []
    assert [c[0] for c in ctx.calls] == ["model", "approval", "model"]
    assert result.final_output == "tool said: A person's approval of this call expired. It was not run."


def test_a_stale_package_is_asked_anew_under_another_name_and_the_fresh_decision_holds():
    runs: list = []
    stale = SimpleNamespace(approved=False, expired=False, stale=True, comment="")
    ctx = Recording(decisions=[stale, decision(True)])
    result = StewardRunner.run_sync(briefer(runs, needs_approval=True), "cats?", ctx=ctx)
    assert [c for c in ctx.calls if c[0] == "approval"] == [
        ("approval", "approve:search"),
        ("approval", "approve:search-2"),
    ]
    assert ctx.packages[0] == ctx.packages[1]  # the same call, bound to the same arguments
    assert runs == [("q", None)] and result.final_output == "tool said: ['a note about q']"


def test_a_package_stale_each_time_it_is_asked_is_refused_after_three_asks():
    runs: list = []
    stale = SimpleNamespace(approved=False, expired=False, stale=True, comment="")
    ctx = Recording(decisions=[stale, stale, stale])
    result = StewardRunner.run_sync(briefer(runs, needs_approval=True), "cats?", ctx=ctx)
    assert [c[1] for c in ctx.calls if c[0] == "approval"] == ["approve:search", "approve:search-2", "approve:search-3"]
    assert runs == [] and "went stale" in result.final_output
