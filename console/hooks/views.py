"""POST /hooks/<id>: a signed webhook delivery becomes a task (runtime/triggers/webhooks.py
verifies it and says what each refusal means). Machine-to-machine, so CSRF-exempt: the
HMAC signature is the authentication. Refusals are {"code", "message", "details"} with
stable codes (docs/api.md); nothing is written for a refused delivery."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from runtime.errors import InputTooLarge, StewardError
from runtime.triggers.services import webhook_body_limit, webhook_deliver

TIMESTAMP = "X-Steward-Timestamp"
SIGNATURE = "X-Steward-Signature"
DELIVERY = "X-Steward-Delivery"


def _refusal(exc: StewardError) -> JsonResponse:
    return JsonResponse({"code": exc.code, "message": exc.message, "details": exc.details}, status=exc.status)


def _body(request) -> bytes:
    """At most the input limit (and its JSON slack), read without trusting Content-Length."""
    limit = webhook_body_limit()
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise InputTooLarge("the body is larger than the input limit", limit=limit)
    body = request.read(limit + 1)
    if len(body) > limit:
        raise InputTooLarge("the body is larger than the input limit", limit=limit)
    return body


@csrf_exempt
@require_POST
def deliver(request, webhook_id: str):
    try:
        accepted = webhook_deliver(
            webhook_id=webhook_id,
            timestamp=request.headers.get(TIMESTAMP),
            signature=request.headers.get(SIGNATURE),
            delivery_id=request.headers.get(DELIVERY),
            body=_body(request),
        )
    except StewardError as exc:
        return _refusal(exc)
    return JsonResponse({"delivery_id": accepted.delivery_id, "task_id": str(accepted.task_id)}, status=202)
