"""Pydantic AI's messages to and from the chat-completions format that ctx.model and the
credential gateway speak (OpenAI's), for text, tool calls, tool returns, retries and usage.

Pydantic AI's own OpenAI model holds this mapping, but in private methods of a model that
sends its requests itself; Steward's model sends nothing (ctx.model does), so the mapping
is written out here, small. What it does not carry (images, files, thinking, the
providers' built-in tools) is dropped from the request, or refused where dropping it
would change what the model is asked.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RequestUsage
from pydantic_core import to_jsonable_python

# The finish reasons chat completions name, as Pydantic AI names them.
_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_call", "content_filter": "content_filter"}


def to_chat(messages: list[ModelMessage], instructions: str | None) -> list[dict]:
    """The conversation as chat-completions messages; the run's instructions first."""
    chat: list[dict] = [{"role": "system", "content": instructions}] if instructions else []
    for message in messages:
        if isinstance(message, ModelRequest):
            chat.extend(_request(message))
        elif isinstance(message, ModelResponse):
            chat.extend(_response(message))
    return chat


def _request(message: ModelRequest) -> list[dict]:
    out: list[dict] = []
    for part in message.parts:
        if isinstance(part, SystemPromptPart):
            out.append({"role": "system", "content": part.content})
        elif isinstance(part, UserPromptPart):
            out.append({"role": "user", "content": _text(part.content)})
        elif isinstance(part, ToolReturnPart):
            out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response_str()})
        elif isinstance(part, RetryFeedbackPart):
            # The application's word on the last answer (a failed output validation, say),
            # not a newer request from the user.
            out.append({"role": "system", "content": part.model_response()})
        elif isinstance(part, RetryPromptPart):  # deprecated, still in older histories
            if part.tool_name is None:
                out.append({"role": "user", "content": part.model_response()})
            else:
                out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response()})
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    pieces = [item for item in content if isinstance(item, str)]
    if len(pieces) != len(content):
        raise ValueError("StewardAgent sends text prompts only (no images, audio or files yet)")
    return "\n".join(pieces)


def _response(message: ModelResponse) -> list[dict]:
    texts = [part.content for part in message.parts if isinstance(part, TextPart)]
    calls = [
        {
            "id": part.tool_call_id,
            "type": "function",
            "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
        }
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]
    if not texts and not calls:
        return []  # thinking only, say: nothing the chat format carries
    said: dict = {"role": "assistant", "content": "\n\n".join(texts) if texts else None}
    if calls:
        said["tool_calls"] = calls
    return [said]


def tools(info: AgentInfo) -> dict:
    """The request's `tools` (and `tool_choice` when the run must end in a tool call)."""
    declared = [*info.function_tools, *info.output_tools]
    if not declared:
        return {}
    params: dict = {"tools": [_tool(t) for t in declared]}
    if not info.allow_text_output:
        params["tool_choice"] = "required"
    return params


def _tool(definition: ToolDefinition) -> dict:
    function: dict = {"name": definition.name, "parameters": definition.parameters_json_schema}
    if definition.description:
        function["description"] = definition.description
    return {"type": "function", "function": function}


def from_receipt(receipt: dict, model_name: str) -> ModelResponse:
    """The model's answer, from ctx.model's receipt (runtime/gateway/client.py): its text,
    the tool calls it asked for, its usage and id. The same on a replay, since a replay
    returns the journaled receipt."""
    parts: list[TextPart | ToolCallPart | ThinkingPart] = []
    if receipt.get("text"):
        parts.append(TextPart(content=receipt["text"]))
    for call in receipt.get("tool_calls") or []:
        function = call.get("function") or {}
        ident = {"tool_call_id": call["id"]} if call.get("id") else {}  # else Pydantic AI makes one
        parts.append(ToolCallPart(tool_name=function.get("name", ""), args=function.get("arguments") or "{}", **ident))
    usage = receipt.get("usage") or {}
    return ModelResponse(
        parts=parts,
        usage=RequestUsage(
            input_tokens=int(usage.get("prompt_tokens") or 0), output_tokens=int(usage.get("completion_tokens") or 0)
        ),
        model_name=model_name,
        provider_name="steward",
        provider_response_id=receipt.get("id"),
        finish_reason=_FINISH.get(receipt.get("finish_reason") or ""),  # type: ignore[arg-type]
    )


def jsonable(value: Any) -> Any:
    """A tool's return value as JSON the journal can store (pydantic models, dataclasses
    and the like dumped as Pydantic AI itself would send them to the model)."""
    return json.loads(json.dumps(to_jsonable_python(value)))
