"""StewardAgent: a plain Pydantic AI `Agent`, run durably as a Steward agent.

    research = Agent("openai:fake-1", instructions="...")

    @research.tool_plain
    def search(query: str) -> list[str]: ...

    StewardAgent(research, name="research.assistant", pool="research")

registers the agent `research.assistant`: its input is the user prompt (and, optionally,
an earlier run's messages), its output the run's final output. As Pydantic AI's own
durable integrations do (DBOSAgent, TemporalAgent in pydantic_ai.durable_exec), the
agent's model and tools are wrapped, and nothing else of it is touched:

* each model request is ctx.model: a keyed effect through the credential gateway (the
  worker holds no provider key), whose receipt holds the reply; a replay returns that
  receipt and sends nothing (runtime/gateway/client.py);
* each tool call is its own journaled step, ctx.step("tool:<name>"), or, for a tool
  declared in `effects=`, ctx.effect with its effect class, key and `requires=` (the
  effect ledger: a write is never sent twice silently). A tool reads the key its effect
  was sent with from `idempotency_key()`;
* a tool call that needs approval (`requires_approval=True`, ApprovalRequired) is a
  ctx.request_approvals package bound to the tool's name and arguments: the attempt ends
  while it waits, and the call runs only once approved.

The run is deterministic between those calls, which is what makes a replay of the journal
land where the crash left it. Tool calls run one at a time, in the order the model asked
for them, so each has the same place in the journal on every attempt.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, RunContext, ToolDenied
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from runtime.agents import agent as register
from runtime.integrations import approvals
from runtime.integrations.bridge import Bridge
from runtime.integrations.effects import effect_options
from runtime.integrations.pydantic_ai import wire

# The chat-completions settings a model request carries through the gateway.
_SETTINGS = ("max_tokens", "temperature", "top_p", "seed", "presence_penalty", "frequency_penalty")
_RETRY = "retry"  # a journaled tool answer that is the tool's ModelRetry, not its value
_ASKS = "approval_required"  # ... that is the tool's ApprovalRequired: it asked for a person first

_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("steward_idempotency_key", default=None)


def idempotency_key() -> str | None:
    """Inside a tool declared in `effects=`: the key its effect was sent with, to pass to
    the service it calls (which deduplicates by it, if it can). None in any other tool."""
    return _key.get()


class PromptInput(BaseModel):
    """A StewardAgent's task input."""

    prompt: str = Field(min_length=1, max_length=100_000)
    # An earlier run's messages (Pydantic AI's JSON of them, `result.all_messages_json()`).
    message_history: list[dict] | None = None


class StewardAgent:
    """Register `agent` (a pydantic_ai.Agent) as the Steward agent `name`.

    `effects`: {tool name: {effect_class, key?, keyed?, requires?}} for the tools that act
    on the outside world (ctx.effect's arguments; `key` and `requires` may be callables of
    the tool's arguments). `model`: the model name the gateway is asked for (its grant is
    `model.call` on `model:<name>`); by default the agent's own model's name.
    `approval_hours`: how long a tool call that needs approval waits for a person (then
    it expires, which means deny). `event_stream_handler`: as Pydantic AI's run() takes it;
    with one (or the agent's own), model requests stream through the gateway and the
    handler sees each reply's events once the reply is whole."""

    def __init__(
        self,
        agent: Agent,
        *,
        name: str,
        pool: str | None = None,
        effects: dict[str, dict] | None = None,
        model: str | None = None,
        description: str = "",
        approval_hours: float = 24,
        event_stream_handler: Any = None,
    ):
        self.agent = agent
        self.name = name
        self.model_name = model or _model_name(agent)
        self.effects = {tool: effect_options(tool, spec) for tool, spec in (effects or {}).items()}
        self.approval_seconds = approval_hours * 3600  # how long a tool call's approval may wait
        self.event_stream_handler = event_stream_handler
        register(name, pool=pool, input=PromptInput, description=description or f"Pydantic AI agent {name}")(self.run)

    def run(self, ctx, input: dict):
        """The registered agent: one Pydantic AI run, its model and tool calls through ctx."""
        params = PromptInput.model_validate(input)
        history = ModelMessagesTypeAdapter.validate_python(params.message_history) if params.message_history else None
        bridge = Bridge(f"pydantic-ai:{self.name}")
        requests = _Requests(ctx, bridge, self.model_name)
        model = FunctionModel(requests, stream_function=requests.stream, model_name=self.model_name)
        journaled = _Journaled(ctx=ctx, bridge=bridge, effects=self.effects, approval_seconds=self.approval_seconds)

        async def main():
            with Agent.parallel_tool_call_execution_mode("sequential"):
                return await self.agent.run(
                    params.prompt,
                    message_history=history,
                    model=model,
                    capabilities=[journaled],
                    event_stream_handler=self.event_stream_handler,
                )

        result = bridge.run(main)
        output = result.output
        return output.model_dump(mode="json") if isinstance(output, BaseModel) else wire.jsonable(output)


class _Requests:
    """The functions of the FunctionModel that stands in for the agent's model: each
    request becomes one ctx.model call, answered from its receipt."""

    def __init__(self, ctx, bridge: Bridge, model_name: str):
        self.ctx, self.bridge, self.model_name = ctx, bridge, model_name
        self.__name__ = f"steward:{model_name}"

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo):
        receipt = await self._ask(messages, info, stream=False)
        return wire.from_receipt(receipt, self.model_name)

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        """A streamed request (a run with an event stream handler): streamed through the
        gateway, whose stop and revocation cut it there, and handed to Pydantic AI once
        whole, as DBOS's and Temporal's wrappers hand over what their step streamed. A
        replay hands over the journaled reply the same way."""
        receipt = await self._ask(messages, info, stream=True)
        if receipt.get("text"):
            yield receipt["text"]
        calls = receipt.get("tool_calls") or []
        if calls:
            yield {
                i: DeltaToolCall(
                    name=call["function"]["name"], json_args=call["function"]["arguments"], tool_call_id=call.get("id")
                )
                for i, call in enumerate(calls)
            }

    async def _ask(self, messages: list[ModelMessage], info: AgentInfo, *, stream: bool) -> dict:
        settings = {k: v for k, v in (info.model_settings or {}).items() if k in _SETTINGS}
        chat = wire.to_chat(messages, info.instructions)
        reply = await self.bridge.call(
            self.ctx.model, chat, model=self.model_name, stream=stream, **wire.tools(info), **settings
        )
        return reply.receipt


@dataclass
class _JournaledToolset(WrapperToolset):
    """Each call of a tool of the wrapped toolset as a step (or an effect) of the journal."""

    ctx: Any = None
    bridge: Any = None
    effects: dict = field(default_factory=dict)

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext, tool: ToolsetTool) -> Any:
        context = contextvars.copy_context()  # the run's: the tool sees what it would unwrapped

        async def call(key: str | None):
            _key.set(key)
            try:
                value = await self.wrapped.call_tool(name, tool_args, ctx, tool)
            except ModelRetry as retry:  # a request to the model, not a failure: journaled as one
                return {_RETRY: retry.message}
            except ApprovalRequired as asks:  # it wants a person's approval first (_Journaled below)
                return {_ASKS: asks.metadata}
            return {"untrusted": True, "source": f"tool:{name}", "value": wire.jsonable(value)}

        def run(*, idempotency_key: str | None = None):
            return self.bridge.on_loop(call(idempotency_key), context)

        spec = self.effects.get(name)
        if spec is None:
            answer = await self.bridge.call(self.ctx.step, f"tool:{name}", run)
        else:
            options = {k: (v(tool_args) if callable(v) else v) for k, v in spec.items()}
            answer = await self.bridge.call(self.ctx.effect, f"tool:{name}", run, **options)
        if _RETRY in answer:
            raise ModelRetry(answer[_RETRY])
        if _ASKS in answer:
            raise ApprovalRequired(answer[_ASKS])
        return answer["value"]


@dataclass
class _Journaled(AbstractCapability):
    """Wraps the run's toolset (not its output tools: validating the output is not outside
    work), and asks a person, through ctx.request_approvals, about each tool call that needs
    approval (`requires_approval=True`, or a tool that raised ApprovalRequired)."""

    ctx: Any = None
    bridge: Any = None
    effects: dict = field(default_factory=dict)
    approval_seconds: float = 24 * 3600

    def get_wrapper_toolset(self, toolset: AbstractToolset) -> AbstractToolset:
        return _JournaledToolset(toolset, ctx=self.ctx, bridge=self.bridge, effects=self.effects)

    async def handle_deferred_tool_calls(
        self, ctx: RunContext, *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        """One approval package per call, bound to the tool's name and arguments, decided
        on its own in the inbox. The attempt ends while they wait (it holds no worker);
        the next replays the run up to here and reads the decisions from the journal.
        Approved: the call runs (a step, or its effect). Denied or expired: the model
        is told so, in the tool's place; stale: asked anew (runtime/integrations/approvals.py).
        Calls deferred for outside execution (CallDeferred) are left to the agent's own handling."""
        calls = requests.approvals
        if not calls:
            return None
        specs = []
        for call in calls:
            arguments = call.args_as_dict()
            options = self.effects.get(call.tool_name, {})
            requires = options.get("requires")
            specs.append(
                {
                    "action": {"tool": call.tool_name, "arguments": arguments},
                    "effect_class": options.get("effect_class", "irreversible"),
                    "expires_in": self.approval_seconds,
                    "requires": requires(arguments) if callable(requires) else requires,
                }
            )
        name = "approve:" + ",".join(call.tool_name for call in calls)
        decided = await approvals.decide(self.bridge, self.ctx, specs, name)
        return DeferredToolResults(
            approvals={
                call.tool_call_id: True if result.approved else ToolDenied(approvals.refusal(result))
                for call, result in zip(calls, decided, strict=True)
            }
        )


def _model_name(agent: Agent) -> str:
    model: Any = agent.model
    if isinstance(model, str):
        return model.partition(":")[2] or model  # "openai:gpt-4o" asks the gateway for gpt-4o
    name: Callable[[], str] | str | None = getattr(model, "model_name", None)
    if isinstance(name, str) and name:
        return name
    raise ValueError("StewardAgent needs model=: the agent has no model whose name the gateway could be asked for")
