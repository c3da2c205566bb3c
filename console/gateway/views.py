"""The credential gateway's routes. Each reads like the others: verify the capability
token (401, nothing written), parse the body (4xx, nothing written), admit the call
through runtime.gateway (the decision and the call row), forward it with the real key,
record how it ended. Refusals are {"code", "message", "details"} (docs/api.md)."""

from __future__ import annotations

import json

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from console.gateway import upstream
from runtime.errors import (
    GatewayNotConfigured,
    InputTooLarge,
    InvalidArgument,
    StewardError,
    UnknownTool,
    UpstreamFailed,
)
from runtime.gateway import services
from runtime.gateway.services import MODEL_ACTION, MODEL_ROUTE, TOOL_ACTION, model_resource, tool_route

TOOL_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
STREAM_CUT = "AUTHZ_REVOKED"  # the terminal SSE event of a stream whose authority went away
STREAM_STOPPED = "TASK_STOPPED"  # ... and of a stream whose task was stopped (runtime/stops/)


def refusal(status: int, code: str, message: str, details: dict | None = None) -> JsonResponse:
    return JsonResponse(
        {"code": code, "message": message, "details": details or {}}, status=status, encoder=DjangoJSONEncoder
    )


def _error(exc: StewardError) -> JsonResponse:
    return refusal(exc.status, exc.code, exc.message, exc.details)


def _denial_details(decision) -> dict:
    return {
        "boundary": decision.boundary,
        "reason_code": decision.reason_code,
        "decision_id": str(decision.id),
        "policy_version": decision.policy_version,
        "authz_revision": decision.authz_revision,
        "action": decision.action,
        "resource": decision.resource,
    }


def _denied(admission) -> JsonResponse:
    """A recorded denial: 403 AUTHORITY_DENIED, or BUDGET_EXHAUSTED naming the budget
    reached; 429 QUOTA_EXCEEDED and 503 QUOTA_UNAVAILABLE carry Retry-After."""
    decision = admission.decision
    said = f"{decision.action} on {decision.resource} denied at {decision.boundary}: {decision.reason_code}"
    details = _denial_details(decision)
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


def _admit(request, claims: dict, route: str, action: str, resource: str, service: str | None = None):
    """Decide the call on current rows and record it (one transaction, runtime/gateway/)."""
    return services.gateway_admit(
        claims=claims,
        route=route,
        action=action,
        resource=resource,
        idempotency_key=request.headers.get("Idempotency-Key"),
        step_seq=_step(request),
        in_flight_seconds=settings.GATEWAY["TIMEOUT_SECONDS"],
        service=service,
    )


def _step(request) -> int | None:
    raw = request.headers.get("Steward-Step")
    if raw is None:
        return None
    if not raw.isdigit() or len(raw) > 10:
        raise InvalidArgument("Steward-Step must be a journal step number", field="Steward-Step")
    return int(raw)


def _after(answer: HttpResponse, fn, *args, **kwargs) -> HttpResponse:
    """Run fn once the answer has been handed to the server, when it closes the response
    (the closers Django's HttpResponse.close() calls before request_finished, which
    gives the database connection back): recording a committed call's receipt costs the
    worker no wait. If the process dies first, the call stays `admitted`, and the
    worker's ledger holds the receipt (docs/adr/0014-credential-gateway.md)."""
    answer._resource_closers.append(lambda: fn(*args, **kwargs))
    return answer


def _tagged(response: HttpResponse, admission) -> HttpResponse:
    response["Steward-Call"] = str(admission.call_id)
    response["Steward-Decision"] = str(admission.decision.id)
    if admission.outcome == "replayed":
        response["Steward-Replayed"] = "1"
    return response


# --- the model: OpenAI-compatible chat completions ---------------------------------------


@csrf_exempt
@require_POST
def chat_completions(request):
    try:
        claims = services.gateway_verify(authorization=request.headers.get("Authorization"), route=MODEL_ROUTE)
        body = services.gateway_body(_body(request), content_type=request.content_type)
        model, stream = _completion_request(body)
        if not settings.GATEWAY["MODEL_URL"]:
            raise GatewayNotConfigured("no model provider is configured (STEWARD_MODEL_URL)")
        admission = _admit(request, claims, MODEL_ROUTE, MODEL_ACTION, model_resource(model))
    except StewardError as exc:
        return _error(exc)
    if admission.outcome == "denied":
        return _denied(admission)
    if admission.outcome == "replayed":
        completion = admission.response["body"]
        if stream:
            return _tagged(_sse(iter([_data(_as_chunk(completion)), b"data: [DONE]\n\n"])), admission)
        return _tagged(JsonResponse(completion), admission)
    forwarded = json.dumps(body).encode()
    try:
        answer = upstream.send(
            "POST",
            settings.GATEWAY["MODEL_URL"] + "/chat/completions",
            key_header="Authorization",
            key_value=f"Bearer {settings.GATEWAY['MODEL_KEY']}",
            body=forwarded,
            timeout=settings.GATEWAY["TIMEOUT_SECONDS"],
            idempotency_key=request.headers["Idempotency-Key"],
            accept="text/event-stream" if stream else "application/json",
        )
    except UpstreamFailed as exc:
        services.gateway_finish(admission, outcome="failed", receipt={"status": None})
        return _error(exc)
    if stream and answer.status == 200:
        return _tagged(_sse(_relay(admission, answer, model, prompt=_estimate(body))), admission)
    try:
        status, completion = answer.status, answer.json()
    except UpstreamFailed as exc:
        services.gateway_finish(admission, outcome="failed", status=answer.status, receipt={"status": answer.status})
        return _error(exc)
    finally:
        answer.close()
    if status != 200 or not isinstance(completion, dict):
        # The provider's error text is not passed on: some providers quote the key back.
        services.gateway_finish(admission, outcome="failed", status=status, receipt={"status": status})
        return _error(UpstreamFailed(f"the provider answered HTTP {status}", status=status))
    return _after(
        _tagged(JsonResponse(completion), admission),
        services.gateway_finish,
        admission,
        outcome="committed",
        status=status,
        receipt={"id": completion.get("id"), "status": status, "model": completion.get("model")},
        response=services.untrusted(model_resource(model), body=completion),
        tokens=services.usage_tokens(
            completion.get("usage"), fallback=_estimate(body) + _estimate(_content(completion))
        ),
    )


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


def _data(value) -> bytes:
    return b"data: " + json.dumps(value).encode() + b"\n\n"


def _as_chunk(completion: dict) -> dict:
    choice = (completion.get("choices") or [{}])[0]
    return {
        "id": completion.get("id"),
        "object": "chat.completion.chunk",
        "model": completion.get("model"),
        "choices": [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": (choice.get("message") or {}).get("content", "")},
                "finish_reason": choice.get("finish_reason"),
            }
        ],
    }


def _relay(admission, answer, model: str, *, prompt: int):
    """Pass the provider's chunks on, checking between them that the call's authority
    still holds (services.gateway_recheck: the tenant's authz_revision and the task's
    status, at most every RECHECK_SECONDS). A denial ends the stream at that chunk with a
    terminal error event (TASK_STOPPED when a stop denied it, AUTHZ_REVOKED otherwise),
    and the call is recorded partial with what was delivered, and why it was cut."""
    text, ident, finish, ended, cut_by, usage = [], None, None, None, None, None
    try:
        for line in answer.lines():
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                ended = "committed"
                break
            denial = services.gateway_recheck(admission)
            if denial is not None:
                ended, cut_by = "partial", denial.reason_code
                yield _cut(denial)
                return
            try:
                chunk = json.loads(payload)
                usage = chunk.get("usage") or usage  # stream_options.include_usage: the last chunk's
                if not chunk.get("choices") and usage:
                    yield b"data: " + payload + b"\n\n"
                    continue
                choice = chunk["choices"][0]
                ident = ident or chunk.get("id")
                text.append(choice.get("delta", {}).get("content") or "")
                finish = choice.get("finish_reason") or finish
            except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                ended = "failed"
                yield b"event: error\n" + _data(
                    {
                        "code": UpstreamFailed.code,
                        "message": "the provider sent a chunk that is not a chat completion chunk",
                        "details": {},
                    }
                )
                return
            yield b"data: " + payload + b"\n\n"
        if ended is None:
            ended = "partial"  # the provider closed the stream before [DONE]
            yield b"event: error\n" + _data(
                {"code": UpstreamFailed.code, "message": "the provider ended the stream early", "details": {}}
            )
            return
        yield b"data: [DONE]\n\n"
    finally:
        # GeneratorExit (the worker went away) lands here too: whatever was delivered is partial.
        answer.close()
        completion = {
            "id": ident,
            "object": "chat.completion",
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "".join(text)}, "finish_reason": finish}
            ],
        }
        services.gateway_finish(
            admission,
            outcome=ended or "partial",
            status=answer.status,
            receipt={
                "id": ident,
                "status": answer.status,
                "model": model,
                "chunks": len(text),
                "stream": True,
                **({"cut_by": cut_by} if cut_by else {}),
            },
            response=services.untrusted(model_resource(model), body=completion),
            # No usage chunk (or a stream cut before it): each chunk
            # delivered counts as one token, plus the prompt's guess.
            tokens=services.usage_tokens(usage, fallback=prompt + len(text)),
        )


def _cut(decision) -> bytes:
    if decision.reason_code == "task_stopped":
        return b"event: error\n" + _data(
            {
                "code": STREAM_STOPPED,
                "message": "the stream's task was stopped: the gateway cut it",
                "details": _denial_details(decision),
            }
        )
    return b"event: error\n" + _data(
        {
            "code": STREAM_CUT,
            "message": f"the stream's authority changed: {decision.action} on {decision.resource} "
            f"is now denied at {decision.boundary} ({decision.reason_code})",
            "details": _denial_details(decision),
        }
    )


# --- tools: outside HTTP APIs ----------------------------------------------------------------


@csrf_exempt
def tool(request, name: str, path: str = ""):
    """A call of the outside API `name`. Its path is decoded and checked once
    (services.tool_target: TOOL_PATH_REFUSED naming the rule otherwise), and from then on
    it is that one value: the call is decided on `target.resource` and forwarded to
    `target.url()`; `path` itself is never read again."""
    try:
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
        admission = _admit(request, claims, route, TOOL_ACTION, target.resource, service=name)
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
        answer = upstream.send(
            method,
            target.url(spec["url"]),
            key_header=header,
            key_value=value,
            body=json.dumps(body).encode() if body is not None else None,
            timeout=settings.GATEWAY["TIMEOUT_SECONDS"],
            idempotency_key=request.headers["Idempotency-Key"],
        )
        try:
            raw_answer = answer.read()
        finally:
            answer.close()
    except UpstreamFailed as exc:
        services.gateway_finish(admission, outcome="failed", receipt={"status": None})
        return _error(exc)
    try:
        shown = json.loads(raw_answer) if raw_answer else None
    except ValueError:
        shown = raw_answer.decode("utf-8", errors="replace")
    ident = answer.header("X-Request-Id") or (shown.get("id") if isinstance(shown, dict) else None)
    # The tool's answer is wrapped, so a tool's 404 is never mistaken for the gateway's.
    return _after(
        _tagged(JsonResponse({"status": answer.status, "body": shown}), admission),
        services.gateway_finish,
        admission,
        outcome="committed",
        status=answer.status,
        receipt={"id": ident if isinstance(ident, (str, int)) else None, "status": answer.status},
        response=services.untrusted(target.resource, status=answer.status, body=shown),
    )
