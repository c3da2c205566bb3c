"""The credential gateway's routes. Each reads like the others: verify the capability
token (401, nothing written), parse the body (4xx, nothing written), admit the call
through runtime.gateway (the decision and the call row), forward it with the real key,
record how it ended. Refusals are {"code", "message", "details"} (docs/api.md).

The routes are async views, served by an ASGI server (docs/adr/0031-asgi-gateway.md): a
stream is a coroutine on the process's event loop, not a thread, and holds no database
connection. The runtime's statements (admission, finish) run in the gateway's database
threads (console/gateway/database.py); the provider is called through aiohttp
(console/gateway/upstream.py); streams are relayed and re-checked together
(console/gateway/streams.py).

A call, once admitted, is carried to its end even if the worker hangs up meanwhile
(Django cancels the view): `_carried` runs the view's body as a task of its own, and an
answer no one will read is closed, which finishes its call."""

from __future__ import annotations

import asyncio
import json

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from console.gateway import upstream
from console.gateway.database import statements
from console.gateway.streams import Relay, data, denial_details
from runtime.errors import (
    GatewayNotConfigured,
    InputTooLarge,
    InvalidArgument,
    StewardError,
    UnknownTool,
    UpstreamFailed,
)
from runtime.gateway import minting, services
from runtime.gateway.services import MODEL_ACTION, MODEL_ROUTE, TOOL_ACTION, model_resource, tool_route

TOOL_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_carrying: set[asyncio.Task] = set()  # bodies whose worker hung up, carried to their end


def refusal(status: int, code: str, message: str, details: dict | None = None) -> JsonResponse:
    return JsonResponse(
        {"code": code, "message": message, "details": details or {}}, status=status, encoder=DjangoJSONEncoder
    )


def _error(exc: StewardError) -> JsonResponse:
    return refusal(exc.status, exc.code, exc.message, exc.details)


def _denied(admission) -> JsonResponse:
    """A recorded denial: 403 AUTHORITY_DENIED, or BUDGET_EXHAUSTED naming the budget
    reached; 429 QUOTA_EXCEEDED and 503 QUOTA_UNAVAILABLE carry Retry-After."""
    decision = admission.decision
    said = f"{decision.action} on {decision.resource} denied at {decision.boundary}: {decision.reason_code}"
    details = denial_details(decision)
    if decision.reason_code == "budget_exhausted":
        return refusal(403, "BUDGET_EXHAUSTED", said, {**details, "budget": admission.budget})
    if decision.reason_code in ("quota_exceeded", "quota_unavailable") and admission.quota is not None:
        taken = admission.quota
        answer = refusal(
            429 if decision.reason_code == "quota_exceeded" else 503,
            decision.reason_code.upper(),
            said,
            {
                **details,
                "quota": {"calls": taken.calls, "window_seconds": taken.window_seconds},
                "retry_after": taken.retry_after,
            },
        )
        answer["Retry-After"] = str(taken.retry_after)
        return answer
    return refusal(403, "AUTHORITY_DENIED", said, details)


def _body(request) -> bytes:
    try:
        return request.body
    except RequestDataTooBig:
        raise InputTooLarge("the body is too large", limit=services.MAX_BODY_BYTES) from None


async def _admit(request, claims: dict, route: str, action: str, resource: str, service: str | None = None):
    """Decide the call on current rows and record it (one statement, runtime/gateway/),
    in a database thread."""
    return await statements.run(
        services.gateway_admit,
        claims=claims,
        route=route,
        action=action,
        resource=resource,
        idempotency_key=request.headers.get("Idempotency-Key"),
        step_seq=_step(request),
        in_flight_seconds=settings.GATEWAY["TIMEOUT_SECONDS"],
        service=service,
    )


def _finish(admission, **ended) -> None:
    """Record how a call ended, in a database thread, not awaited: the answer does not
    wait for it (docs/adr/0014-credential-gateway.md)."""
    statements.submit(services.gateway_finish, admission, **ended)


def _served_by_asgi(request) -> None:
    """The gateway needs an event loop that outlives the request: under a WSGI server
    Django would run the view in a loop of its own and read a whole stream before
    sending any of it (no cut, no backpressure)."""
    if "wsgi.input" in request.META:
        raise GatewayNotConfigured(
            "the credential gateway is served by an ASGI server (uvicorn console.asgi:application; docs/deploy.md)"
        )


async def _carried(body, request, *args, **kwargs) -> HttpResponse:
    """Run the view's body as a task of its own. If the worker hangs up, Django cancels
    the view; the body goes on to its end, so an admitted call is forwarded and recorded
    as it would have been, and the answer no one will read is closed (a relay's close
    finishes its call partial)."""
    work = asyncio.ensure_future(body(request, *args, **kwargs))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        _carrying.add(work)
        work.add_done_callback(_abandoned)
        raise


def _abandoned(work: asyncio.Task) -> None:
    _carrying.discard(work)
    if work.cancelled() or work.exception() is not None:
        return
    relay = getattr(work.result(), "relay", None)
    if relay is not None:
        relay.close()  # never iterated: its call is finished partial


def _step(request) -> int | None:
    raw = request.headers.get("Steward-Step")
    if raw is None:
        return None
    if not raw.isdigit() or len(raw) > 10:
        raise InvalidArgument("Steward-Step must be a journal step number", field="Steward-Step")
    return int(raw)


def _tagged(response: HttpResponse, admission) -> HttpResponse:
    response["Steward-Call"] = str(admission.call_id)
    response["Steward-Decision"] = str(admission.decision.id)
    if admission.outcome == "replayed":
        response["Steward-Replayed"] = "1"
    return response


# --- the model: OpenAI-compatible chat completions ---------------------------------------


@csrf_exempt
@require_POST
async def chat_completions(request):
    return await _carried(_chat_completions, request)


async def _chat_completions(request):
    try:
        _served_by_asgi(request)
        claims = services.gateway_verify(authorization=request.headers.get("Authorization"), route=MODEL_ROUTE)
        body = services.gateway_body(_body(request), content_type=request.content_type)
        model, stream = _completion_request(body)
        if not settings.GATEWAY["MODEL_URL"]:
            raise GatewayNotConfigured("no model provider is configured (STEWARD_MODEL_URL)")
        admission = await _admit(request, claims, MODEL_ROUTE, MODEL_ACTION, model_resource(model))
    except StewardError as exc:
        return _error(exc)
    if admission.outcome == "denied":
        return _denied(admission)
    if admission.outcome == "replayed":
        completion = admission.response["body"]
        if stream:
            return _tagged(_sse(_replayed(_as_chunk(completion))), admission)
        return _tagged(JsonResponse(completion), admission)
    forwarded = json.dumps(body).encode()
    try:
        answer = await upstream.send(
            "POST",
            settings.GATEWAY["MODEL_URL"] + "/chat/completions",
            key_header="Authorization",
            key_value=f"Bearer {settings.GATEWAY['MODEL_KEY']}",
            body=forwarded,
            timeout=settings.GATEWAY["TIMEOUT_SECONDS"],
            idempotency_key=admission.key,
            accept="text/event-stream" if stream else "application/json",
        )
    except UpstreamFailed as exc:
        _finish(admission, outcome="failed", receipt={"status": None})
        return _error(exc)
    if stream and answer.status == 200:
        relay = Relay(admission, answer, model, prompt=_estimate(body))
        response = _tagged(_sse(relay), admission)
        response.relay = relay
        return response
    try:
        status, completion = answer.status, await answer.json()
    except UpstreamFailed as exc:
        _finish(admission, outcome="failed", status=answer.status, receipt={"status": answer.status})
        return _error(exc)
    finally:
        answer.close()
    if status != 200 or not isinstance(completion, dict):
        # The provider's error text is not passed on: some providers quote the key back.
        _finish(admission, outcome="failed", status=status, receipt={"status": status})
        return _error(UpstreamFailed(f"the provider answered HTTP {status}", status=status))
    _finish(
        admission,
        outcome="committed",
        status=status,
        receipt={"id": completion.get("id"), "status": status, "model": completion.get("model")},
        response=services.untrusted(model_resource(model), body=completion),
        tokens=services.usage_tokens(
            completion.get("usage"), fallback=_estimate(body) + _estimate(_content(completion))
        ),
    )
    return _tagged(JsonResponse(completion), admission)


def _estimate(value) -> int:
    """Tokens, guessed from text when a provider reports no usage: about four characters
    each (docs/limits.md, "Budgets")."""
    return -(-len(value if isinstance(value, str) else json.dumps(value.get("messages"))) // 4)


def _content(completion: dict) -> str:
    try:
        return str(completion["choices"][0]["message"]["content"] or "")
    except (KeyError, IndexError, TypeError):
        return ""


def _completion_request(body: dict) -> tuple[str, bool]:
    model, messages, stream = body.get("model"), body.get("messages"), body.get("stream", False)
    if not isinstance(model, str) or not 1 <= len(model) <= 200 or not model.isprintable():
        raise InvalidArgument("model must be a name of 1-200 printable characters", field="model")
    if not isinstance(messages, list) or not messages:
        raise InvalidArgument("messages must be a non-empty list", field="messages")
    if not isinstance(stream, bool):
        raise InvalidArgument("stream must be true or false", field="stream")
    return model, stream


def _sse(chunks) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _as_chunk(completion: dict) -> dict:
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    delta = {"role": "assistant", "content": message.get("content", "")}
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:  # a provider's record: only its well-formed calls
        delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(calls) if isinstance(call, dict)]
    return {
        "id": completion.get("id"),
        "object": "chat.completion.chunk",
        "model": completion.get("model"),
        "choices": [{"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason")}],
    }


async def _replayed(chunk: dict):
    """A committed key's recorded completion, as a stream of one chunk."""
    yield data(chunk)
    yield b"data: [DONE]\n\n"


# --- tools: outside HTTP APIs ----------------------------------------------------------------


@csrf_exempt
async def tool(request, name: str, path: str = ""):
    """A call of the outside API `name`. Its path is decoded and checked once
    (services.tool_target: TOOL_PATH_REFUSED naming the rule otherwise), and from then on
    it is that one value: the call is decided on `target.resource` and forwarded to
    `target.url()`; `path` itself is never read again."""
    return await _carried(_tool, request, name, path)


async def _tool(request, name: str, path: str):
    try:
        _served_by_asgi(request)
        route = tool_route(name)
        claims = services.gateway_verify(authorization=request.headers.get("Authorization"), route=route)
        spec = settings.GATEWAY["TOOLS"].get(name)
        if spec is None:
            raise UnknownTool(f"no tool {name!r} is configured", tool=name)
        method = request.method.upper()
        if method not in TOOL_METHODS:
            raise InvalidArgument(f"a tool is called with {', '.join(TOOL_METHODS)}", field="method")
        target = services.tool_target(name, path, request.META.get("QUERY_STRING", ""))
        raw = _body(request)
        body = services.gateway_body(raw, content_type=request.content_type) if raw else None
        admission = await _admit(request, claims, route, TOOL_ACTION, target.resource, service=name)
    except StewardError as exc:
        return _error(exc)
    if admission.outcome == "denied":
        return _denied(admission)
    if admission.outcome == "replayed":
        recorded = admission.response
        return _tagged(JsonResponse({"status": recorded["status"], "body": recorded["body"]}), admission)
    header = spec["header"]
    value = f"Bearer {spec['key']}" if header.lower() == "authorization" else spec["key"]
    try:
        answer = await upstream.send(
            method,
            target.url(spec["url"]),
            key_header=header,
            key_value=value,
            body=json.dumps(body).encode() if body is not None else None,
            timeout=settings.GATEWAY["TIMEOUT_SECONDS"],
            idempotency_key=admission.key,
        )
        try:
            raw_answer = await answer.read()
        finally:
            answer.close()
    except UpstreamFailed as exc:
        _finish(admission, outcome="failed", receipt={"status": None})
        return _error(exc)
    try:
        shown = json.loads(raw_answer) if raw_answer else None
    except ValueError:
        shown = raw_answer.decode("utf-8", errors="replace")
    ident = answer.header("X-Request-Id") or (shown.get("id") if isinstance(shown, dict) else None)
    _finish(
        admission,
        outcome="committed",
        status=answer.status,
        receipt={"id": ident if isinstance(ident, (str, int)) else None, "status": answer.status},
        response=services.untrusted(target.resource, status=answer.status, body=shown),
    )
    # The tool's answer is wrapped, so a tool's 404 is never mistaken for the gateway's.
    return _tagged(JsonResponse({"status": answer.status, "body": shown}), admission)


# --- the minting service: a worker's token for an attempt it holds ------------------------


@csrf_exempt
@require_POST
async def tokens(request):
    """A capability token for an attempt the asking worker holds (runtime/gateway/minting.py,
    docs/adr/0034-token-minting.md). The worker's credential, the body's checks, the
    decision on current rows and its audit event are the runtime's; signing is here, on
    the web side, which alone holds the key. Refusals as every route's: a stable code."""
    try:
        issued = await statements.run(
            minting.token_issue,
            authorization=request.headers.get("Authorization"),
            raw=_body(request),
            content_type=request.content_type,
        )
    except StewardError as exc:
        return _error(exc)
    answer = JsonResponse(issued.as_dict())
    answer["Cache-Control"] = "no-store"  # a credential's answer: no cache keeps it
    return answer
