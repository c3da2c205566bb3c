"""StewardRunner: a plain OpenAI Agents SDK agent, run durably inside a Steward agent.

    briefer = Agent(name="briefer", model="fake-1", tools=[search])
    result = Runner.run_sync(briefer, "warmup?")                     # plain
    result = StewardRunner.run_sync(briefer, "warmup?", ctx=ctx)     # durable, in an agent body

`StewardRunner.run_sync` takes what `Runner.run_sync` takes, plus the attempt's Context,
and returns the SDK's own RunResult. As DBOS's and Temporal's Agents SDK integrations do,
the agent is not changed; its model and its function tools are wrapped for the run:

* the model is a `Model` (runtime/integrations/openai_agents/runner.py:_StewardModel)
  whose every request is ctx.model: a keyed effect through the credential gateway (the
  worker holds no provider key), whose receipt holds the reply. A replay returns that
  receipt and sends nothing. The request is the SDK's own chat-completions mapping
  (agents.models.chatcmpl_converter.Converter), so what the gateway is asked is what the
  SDK's OpenAIChatCompletionsModel would have asked;
* each function tool call is its own journaled step, ctx.step("tool:<name>"), or, for a
  tool declared in `effects=`, ctx.effect with its effect class, key and `requires=`. A
  tool reads the key its effect was sent with from `idempotency_key()`;
* a tool call that needs approval (`needs_approval=`) interrupts the SDK's run, as it
  does unwrapped; each interruption becomes a ctx.request_approvals package bound to the
  tool's name and arguments, and the run is resumed from its RunState with the decisions
  (`state.approve`, `state.reject`). The attempt ends while the package waits; a stale
  package is asked anew (runtime/integrations/approvals.py).

Tool calls of one turn run one at a time, in the order the model asked for them, so each
has the same place in the journal on every attempt. Tracing is off unless the run_config
given turns it on: the SDK's default exporter sends the run's data to OpenAI, around the
gateway.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, FunctionTool, Model, ModelProvider, ModelResponse, RunConfig, Runner, Usage
from agents.exceptions import UserError
from agents.items import ToolApprovalItem
from agents.models.chatcmpl_converter import Converter
from openai.types.chat import ChatCompletionMessage
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
    Function,
)
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from runtime.integrations import approvals
from runtime.integrations.bridge import Bridge
from runtime.integrations.effects import effect_options

# The chat-completions settings a model request carries through the gateway.
_SETTINGS = ("max_tokens", "temperature", "top_p", "presence_penalty", "frequency_penalty")
DEFAULT_MAX_TURNS = 10

_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("steward_agents_idempotency_key", default=None)


def idempotency_key() -> str | None:
    """Inside a tool declared in `effects=`: the key its effect was sent with, to pass to
    the service it calls. None in any other tool."""
    return _key.get()


class StewardRunner:
    """`Runner.run_sync`, durable: call it from a Steward agent's body with its ctx."""

    @classmethod
    def run_sync(
        cls,
        starting_agent: Agent,
        input: str | list,
        *,
        ctx,
        context: Any = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        run_config: RunConfig | None = None,
        effects: dict[str, dict] | None = None,
        model: str | None = None,
        approval_hours: float = 24,
        stream: bool = False,
    ):
        """Run `starting_agent` on `input` as Runner.run_sync does; return its RunResult.

        `effects`: {tool name: {effect_class, key?, keyed?, requires?}} for the tools that
        act on the outside world (`key` and `requires` may be callables of the tool's
        arguments). `model`: the model the gateway is asked for (its grant is `model.call`
        on `model:<name>`); by default the agent's own model's name. `stream`: each model
        request streams through the gateway (where a stop or a revocation cuts it) and is
        handed to the SDK once whole. `approval_hours`: how long a tool call that needs
        approval waits for a person (then it expires, which means reject)."""
        specs = {tool: effect_options(tool, spec) for tool, spec in (effects or {}).items()}
        bridge = Bridge(f"openai-agents:{starting_agent.name}")
        steward_model = _StewardModel(ctx, bridge, model or _model_name(starting_agent), stream=stream)
        config = dataclasses.replace(
            run_config or RunConfig(tracing_disabled=True), model=steward_model, model_provider=_NoProvider()
        )
        approval_seconds = approval_hours * 3600

        async def main():
            turn = asyncio.Lock()  # one tool call at a time, in the order they were asked for
            agent = _wrapped(starting_agent, ctx, bridge, specs, turn, {})
            result = await Runner.run(agent, input, context=context, max_turns=max_turns, run_config=config)
            while result.interruptions:
                state = result.to_state()
                decided = await approvals.decide(
                    bridge,
                    ctx,
                    [_approval(item, specs, approval_seconds) for item in result.interruptions],
                    "approve:" + ",".join(_tool_name(item) for item in result.interruptions),
                )
                for item, decision in zip(result.interruptions, decided, strict=True):
                    if decision.approved:
                        state.approve(item)
                    else:
                        state.reject(item, rejection_message=approvals.refusal(decision))
                result = await Runner.run(agent, state, max_turns=max_turns, run_config=config)
            return result

        return bridge.run(main)

    @classmethod
    def output(cls, result) -> Any:
        """A RunResult's final output as JSON a Steward task can return."""
        final = result.final_output
        if isinstance(final, BaseModel):
            return final.model_dump(mode="json")
        return json.loads(json.dumps(to_jsonable_python(final)))


# --- the model ------------------------------------------------------------------------


class _StewardModel(Model):
    """Each request: the SDK's chat-completions mapping, sent as one ctx.model call; the
    answer built from its receipt, the same on a replay."""

    def __init__(self, ctx, bridge: Bridge, name: str, *, stream: bool):
        self.ctx, self.bridge, self.name, self.stream = ctx, bridge, name, stream

    async def get_response(
        self,
        system_instructions,
        input,
        model_settings,
        tools,
        output_schema,
        handoffs,
        tracing,
        *,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
    ) -> ModelResponse:
        if prompt is not None or previous_response_id or conversation_id:
            raise UserError("StewardRunner sends chat completions: no stored prompts or server-side conversations")
        messages = list(Converter.items_to_messages(input, model=self.name))
        if system_instructions:
            messages.insert(0, {"role": "system", "content": system_instructions})
        params: dict[str, Any] = {
            k: getattr(model_settings, k) for k in _SETTINGS if getattr(model_settings, k, None) is not None
        }
        declared = [Converter.tool_to_openai(tool) for tool in tools]
        declared += [Converter.convert_handoff_tool(handoff) for handoff in handoffs]
        if declared:
            params["tools"] = declared
            choice = Converter.convert_tool_choice(model_settings.tool_choice)
            if isinstance(choice, str | dict):
                params["tool_choice"] = choice
        response_format = Converter.convert_response_format(output_schema)
        if isinstance(response_format, dict):
            params["response_format"] = response_format
        messages = json.loads(json.dumps(to_jsonable_python(messages)))
        params = json.loads(json.dumps(to_jsonable_python(params)))
        reply = await self.bridge.call(self.ctx.model, messages, model=self.name, stream=self.stream, **params)
        return _from_receipt(reply.receipt)

    def stream_response(self, *args, **kwargs) -> AsyncIterator:
        raise UserError("StewardRunner does not wrap Runner.run_streamed yet: run_sync(..., stream=True)")


class _NoProvider(ModelProvider):
    """The run's model is always the Steward model (run_config.model); an agent that names
    another model by string must not reach a provider that would send it around the gateway."""

    def get_model(self, model_name: str | None) -> Model:
        raise UserError(f"StewardRunner sends every request through the gateway; not to {model_name!r}")

    async def aclose(self) -> None:
        return None


def _from_receipt(receipt: dict) -> ModelResponse:
    calls: list[Any] = [
        ChatCompletionMessageFunctionToolCall(
            id=call.get("id") or f"call_{i}",
            type="function",
            function=Function(name=call["function"]["name"], arguments=call["function"].get("arguments") or "{}"),
        )
        for i, call in enumerate(receipt.get("tool_calls") or [])
    ]
    message = ChatCompletionMessage(role="assistant", content=receipt.get("text") or None, tool_calls=calls or None)
    usage = receipt.get("usage") or {}
    tokens_in, tokens_out = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return ModelResponse(
        output=Converter.message_to_output_items(message),
        usage=Usage(requests=1, input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out),
        response_id=None,
        request_id=receipt.get("id"),
    )


def _model_name(agent: Agent) -> str:
    model = agent.model
    if isinstance(model, str) and model:
        return model.rpartition("/")[2]  # "openai/gpt-4o" asks the gateway for gpt-4o
    name = getattr(model, "model", None)
    if isinstance(name, str) and name:
        return name
    raise ValueError("StewardRunner needs model=: the agent names no model the gateway could be asked for")


# --- the tools ------------------------------------------------------------------------


def _wrapped(agent: Agent, ctx, bridge: Bridge, effects: dict, turn: asyncio.Lock, seen: dict) -> Agent:
    """A clone of `agent` whose function tools are journaled, and whose handoffs' agents
    are wrapped the same way (each agent once, however often it is handed off to)."""
    if id(agent) in seen:
        return seen[id(agent)]
    clone = agent.clone()
    seen[id(agent)] = clone
    clone.tools = [
        _journaled(tool, ctx, bridge, effects.get(tool.name), turn) if isinstance(tool, FunctionTool) else tool
        for tool in agent.tools
    ]
    clone.handoffs = [
        _wrapped(h, ctx, bridge, effects, turn, seen) if isinstance(h, Agent) else h for h in agent.handoffs
    ]
    return clone


def _journaled(tool: FunctionTool, ctx, bridge: Bridge, spec: dict | None, turn: asyncio.Lock) -> FunctionTool:
    invoke = tool.on_invoke_tool
    name = tool.name

    async def on_invoke_tool(tool_context, arguments: str):
        context = contextvars.copy_context()  # the run's: the tool sees what it would unwrapped

        async def call(key: str | None):
            _key.set(key)
            value = await invoke(tool_context, arguments)
            return {
                "untrusted": True,
                "source": f"tool:{name}",
                "value": json.loads(json.dumps(to_jsonable_python(value))),
            }

        def run(*, idempotency_key: str | None = None):
            return bridge.on_loop(call(idempotency_key), context)

        async with turn:
            if spec is None:
                answer = await bridge.call(ctx.step, f"tool:{name}", run)
            else:
                parsed = json.loads(arguments or "{}")
                options = {k: (v(parsed) if callable(v) else v) for k, v in spec.items()}
                answer = await bridge.call(ctx.effect, f"tool:{name}", run, **options)
        return answer["value"]

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


# --- approvals ------------------------------------------------------------------------


def _tool_name(item: ToolApprovalItem) -> str:
    return item.name or "tool"


def _approval(item: ToolApprovalItem, effects: dict, seconds: float) -> dict:
    arguments = json.loads(item.arguments or "{}")
    options = effects.get(_tool_name(item), {})
    requires = options.get("requires")
    return {
        "action": {"tool": _tool_name(item), "arguments": arguments},
        "effect_class": options.get("effect_class", "irreversible"),
        "expires_in": seconds,
        "requires": requires(arguments) if callable(requires) else requires,
    }
