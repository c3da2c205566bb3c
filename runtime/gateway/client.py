"""The worker's side of the credential gateway: ctx.model() and ctx.tool() call the
gateway over HTTP with a capability token, never a provider key (the worker has none).

Each call is an effect through the ledger (runtime/effects/ledger.py): the intent is
committed, the gateway is called with the effect's key as `Idempotency-Key`, and the
receipt is committed and journaled. The gateway deduplicates by that key (a committed
key is answered from its record, nothing forwarded), so a call is `keyed`: recovery
re-sends an interrupted one with the same key, and a replay returns the journaled
receipt without any request at all.

A 403 from the gateway raises AuthorityDenied naming the boundary that enforced it
(credential_gateway, or tenant_isolation) and why; it is not journaled and the intent
stays, so a resumed task asks the gateway again, on the authority it has then. A stream
cut because its authority went away (an `event: error` with code AUTHZ_REVOKED after the
stream began) was forwarded and partly answered: it raises ledger.Cut, so the effect is
settled `partial` with what was delivered before the same AuthorityDenied propagates; a
resumed attempt sends it again under its key, decided by the gateway on the authority
the task has then (runtime/effects/ledger.py).

A stopped task is not a denial: a token refused `task_stopped`, or a stream cut with
TASK_STOPPED, raises StopRequested, and the attempt ends for the stop (the task ends
cancelled, never blocked: runtime/worker/executor.py). The effect's intent stays, in
flight with an unknown outcome, which the stop summary lists as such.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from runtime import config
from runtime.attempts import interrupts
from runtime.attempts.context import Context
from runtime.attempts.journal import JournalCall, replay_or_run
from runtime.effects import ledger
from runtime.errors import AuthorityDenied, CapabilityRefused, EffectNotApplied, Fenced, StopRequested
from runtime.gateway import MODEL_ROUTE, model_resource, tool_call_piece, tool_resource, tool_route
from runtime.taint import UntrustedText  # defined with the taint rule; imported from here too

TOKEN_SLACK = 30  # a cached token with less than this left is fetched again
TIMEOUT_SECONDS = 300.0
READ_METHODS = ("GET", "HEAD")
STREAM_STOPPED = "TASK_STOPPED"  # the gateway's terminal stream event for a stopped task

# Loopback or not, a proxy from the environment must never see a capability token.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def token(ctx, audience: str) -> str:
    """A capability token for this attempt and audience, fetched once from the web side's
    minting service and cached on the Context until it nears its expiry. This process
    holds no signing key (docs/adr/0034-token-minting.md): it asks with its worker's
    credential, and the service gives a token only for an attempt this worker holds, on
    current rows. A superseded attempt gets Fenced here, never a token for its successor;
    a stopped task's attempt gets StopRequested."""
    cache = ctx.__dict__.setdefault("_gateway_tokens", {})
    held = cache.get(audience)
    if held is not None and held[1] - time.time() > TOKEN_SLACK:
        return held[0]
    status, answer = _mint_request({"task": str(ctx.task_id), "epoch": ctx.epoch, "audience": audience})
    if status == 200:
        cache[audience] = (answer["token"], time.time() + int(answer["expires_in"]))
        return answer["token"]
    reason = (answer.get("details") or {}).get("reason", "")
    if answer.get("code") == "TOKEN_REFUSED" and reason == "task_stopped":
        raise StopRequested(ctx.task_id, ctx.epoch, "minting a gateway token")  # its token would be refused
    if answer.get("code") == "TOKEN_REFUSED" and reason in FENCED_REASONS:
        raise Fenced(ctx.task_id, ctx.epoch, "gateway")
    if status == 401:
        # This worker's credential is missing, unknown or revoked: nothing was sent on.
        raise CapabilityRefused(answer.get("message") or "worker credential refused", reason=f"worker_{reason}")
    if 400 <= status < 500:
        raise EffectNotApplied(f"{answer.get('code')}: {answer.get('message')}")
    raise OSError(f"the minting service answered HTTP {status}: {answer.get('code')}")  # the ledger tries again


# A refused mint whose attempt no longer holds the task: it ends as a fenced write does.
FENCED_REASONS = frozenset({"no_such_task", "stale_epoch", "no_live_attempt", "not_your_attempt", "lease_expired"})
MINT_TIMEOUT_SECONDS = 30.0
_minting = threading.local()  # this thread's kept-alive connection to the minting service


def _mint_request(body: dict) -> tuple[int, dict]:
    """(status, answer) of one POST /gateway/tokens, over this thread's kept-alive
    connection: an attempt's first call per audience costs one round trip, not a new TCP
    connection. A connection the server closed while idle is opened again, once."""
    credential = config.worker_credential()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if credential:
        headers["Authorization"] = f"Bearer {credential}"
    data = json.dumps(body).encode()
    for fresh in (False, True):
        connection, path = _mint_connection(fresh)
        try:
            connection.request("POST", path, body=data, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        except (http.client.HTTPException, OSError):
            connection.close()
            if fresh:
                raise
            continue
        if response.getheader("Connection", "").lower() == "close":
            connection.close()
        return response.status, _refusal(raw) if response.status != 200 else json.loads(raw)
    raise AssertionError("unreachable")


def _mint_connection(fresh: bool):
    base = urllib.parse.urlsplit(config.gateway_url())
    where = (base.scheme, base.hostname, base.port)
    held = getattr(_minting, "held", None)
    if held is None or held[0] != where or fresh:
        if held is not None:
            held[1].close()
        kind = http.client.HTTPSConnection if base.scheme == "https" else http.client.HTTPConnection
        held = (where, kind(base.hostname or "", base.port, timeout=MINT_TIMEOUT_SECONDS))
        _minting.held = held
    return held[1], base.path.rstrip("/") + "/gateway/tokens"


def model(ctx: Context, call: JournalCall, messages, *, model: str, stream: bool, params: dict) -> UntrustedText:
    """One chat completion through the gateway, as an effect; its text, untrusted."""
    source = model_resource(model)
    body = {**params, "model": model, "messages": messages, "stream": bool(stream)}

    def chat(body, *, idempotency_key):
        return _chat(ctx, call.seq, body, idempotency_key)

    receipt = replay_or_run(
        call,
        replay=ledger.replayed,
        run=lambda call: ledger.perform(
            ctx, call, chat, (body,), {}, effect_class="idempotent", key=None, keyed=True, untrusted=True
        ),  # a model wrote it (the journal and ledger say so)
    )
    return UntrustedText(receipt["text"], source=source, receipt=receipt)


def tool(
    ctx: Context, call: JournalCall, tool_name: str, method: str, path: str, payload, effect_class: str | None
) -> dict:
    """One call of an outside API through the gateway, as an effect. Its answer comes
    back as {"untrusted": true, "source", "status", "body", ...}: data, never an order."""
    method = method.upper()
    request = {"tool": tool_name, "method": method, "path": path.lstrip("/"), "json": payload}

    def send(request, *, idempotency_key):
        return _tool(ctx, call.seq, request, idempotency_key)

    # The gateway deduplicates committed keys, and passes the key on to the tool.
    chosen = effect_class or ("read" if method in READ_METHODS else "idempotent")
    return replay_or_run(
        call,
        replay=ledger.replayed,
        run=lambda call: ledger.perform(
            ctx, call, send, (request,), {}, effect_class=chosen, key=None, keyed=True, untrusted=True
        ),  # an outside API wrote it
    )


def _chat(ctx, seq: int, body: dict, key: str) -> dict:
    response = _post(
        ctx,
        seq,
        "/gateway/model/v1/chat/completions",
        MODEL_ROUTE,
        key,
        "POST",
        body,
        accept="text/event-stream" if body["stream"] else "application/json",
    )
    tags = _tags(response)
    extra: dict = {}  # tool calls and usage, when the reply has them
    with response, interrupts.region(interrupts.GATEWAY):
        if body["stream"]:
            delivered: list[str] = []
            try:
                text, ident, finish = _read_stream(ctx, response, delivered, extra)
            except AuthorityDenied as denial:
                if denial.details.get("gateway_code") != "AUTHZ_REVOKED":
                    raise
                raise ledger.Cut(
                    denial,
                    receipt={
                        "untrusted": True,
                        "source": model_resource(body["model"]),
                        "cut": "AUTHZ_REVOKED",
                        "chunks": len(delivered),
                        "text_length": sum(len(piece) for piece in delivered),
                        "call": tags["call"],
                        "decision": tags["decision"],
                        "denial": denial.decision_id,
                        "boundary": denial.boundary,
                        "reason_code": denial.reason_code,
                    },
                ) from None
        else:
            completion = json.loads(response.read())
            choice = completion["choices"][0]
            text, ident, finish = (
                choice["message"].get("content") or "",
                completion.get("id"),
                choice.get("finish_reason"),
            )
            # What an agent framework needs besides the text (runtime/integrations/): the
            # function calls the model asked for, and what the call cost. Kept in the
            # receipt, so a replay hands them back as the first attempt saw them.
            extra = {
                key: value
                for key, value in (
                    ("tool_calls", choice["message"].get("tool_calls")),
                    ("usage", completion.get("usage")),
                )
                if value
            }
    return {
        "untrusted": True,
        "source": model_resource(body["model"]),
        "text": text,
        "id": ident,
        "finish_reason": finish,
        **extra,
        **tags,
    }


def _tool(ctx, seq: int, request: dict, key: str) -> dict:
    name = request["tool"]
    response = _post(
        ctx, seq, f"/gateway/tools/{name}/{request['path']}", tool_route(name), key, request["method"], request["json"]
    )
    tags = _tags(response)
    with response, interrupts.region(interrupts.GATEWAY):
        answer = json.loads(response.read())
    return {
        "untrusted": True,
        "source": tool_resource(name, request["path"]),
        "status": answer["status"],
        "body": answer["body"],
        **tags,
    }


def _tags(response) -> dict:
    return {
        "call": response.headers.get("Steward-Call"),
        "decision": response.headers.get("Steward-Decision"),
        "replayed": response.headers.get("Steward-Replayed") == "1",
    }


def _post(ctx, seq: int, path: str, audience: str, key: str, method: str, body, *, accept="application/json"):
    with interrupts.region(interrupts.STEWARD):
        bearer = token(ctx, audience)
    headers = {"Authorization": f"Bearer {bearer}", "Idempotency-Key": key, "Steward-Step": str(seq), "Accept": accept}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(config.gateway_url() + path, data=data, headers=headers, method=method)
    try:
        with interrupts.region(interrupts.GATEWAY):
            return _OPENER.open(request, timeout=TIMEOUT_SECONDS)
    except urllib.error.HTTPError as err:
        with err:
            refusal = _refusal(err.read())
        _raise(err.code, refusal, ctx)


def _refusal(raw: bytes) -> dict:
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    return (
        value
        if isinstance(value, dict)
        else {"code": "UNREADABLE", "message": raw[:200].decode(errors="replace"), "details": {}}
    )


def _raise(status: int, refusal: dict, ctx):
    details = refusal.get("details") or {}
    message = refusal.get("message") or f"the gateway answered HTTP {status}"
    if refusal.get("code") == STREAM_STOPPED or details.get("reason_code") == "task_stopped":
        # The task was stopped, not denied: the attempt ends for the stop (cancelled).
        raise StopRequested(
            ctx.task_id,
            ctx.epoch,
            "stream cut by the gateway" if refusal.get("code") == STREAM_STOPPED else "token refused by the gateway",
        )
    if status == 403 or refusal.get("code") == "AUTHZ_REVOKED":
        raise AuthorityDenied(
            message,
            boundary=details.get("boundary", "credential_gateway"),
            reason_code=details.get("reason_code", "denied"),
            decision_id=details.get("decision_id", ""),
            **{k: v for k, v in details.items() if k not in ("boundary", "reason_code", "decision_id")},
            gateway_code=refusal.get("code"),
        )
    if refusal.get("code") == "CALL_IN_FLIGHT":
        raise OSError("the gateway is still carrying an earlier send of this call")  # the ledger sends it again
    if status == 401:
        raise CapabilityRefused(message, reason=details.get("reason", "malformed"))
    if 400 <= status < 500 or refusal.get("code") in ("UPSTREAM_FAILED", "QUOTA_UNAVAILABLE"):
        # The gateway refused the request (a 429 QUOTA_EXCEEDED included), or the
        # provider did not act on it, or the call was never forwarded (QUOTA_UNAVAILABLE:
        # a recorded denial while Redis is down, docs/adr/0019-budgets.md).
        raise EffectNotApplied(f"{refusal.get('code')}: {message}")
    raise OSError(f"the gateway answered HTTP {status}: {refusal.get('code')}")  # may have acted: the ledger decides


def _read_stream(ctx, response, text: list[str], extra: dict) -> tuple[str, str | None, str | None]:
    """The stream's text, id and finish reason; `text` holds the pieces as they come, so
    a caller that sees it cut knows what was delivered. The function calls the deltas
    spell out piece by piece, and the usage a last chunk may carry, go into `extra`."""
    ident, finish, event = None, None, None
    calls: dict[int, dict] = {}
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            event = None
            continue
        if line.startswith("event:"):
            event = line[6:].strip()
            continue
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if event == "error":
            _raise(200, _refusal(payload.encode()), ctx)
        if payload == "[DONE]":
            if calls:
                extra["tool_calls"] = [calls[i] for i in sorted(calls)]
            return "".join(text), ident, finish
        chunk = json.loads(payload)
        ident = ident or chunk.get("id")
        if chunk.get("usage"):
            extra["usage"] = chunk["usage"]
        if not chunk.get("choices"):
            continue  # the usage chunk (stream_options.include_usage) has none
        choice = chunk["choices"][0]
        delta = choice.get("delta") or {}
        text.append(delta.get("content") or "")
        for piece in delta.get("tool_calls") or []:
            tool_call_piece(calls, piece.get("index", 0), piece)
        finish = choice.get("finish_reason") or finish
    raise OSError("the gateway's stream ended before [DONE]")
