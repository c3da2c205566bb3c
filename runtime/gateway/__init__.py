"""The credential gateway's runtime half: admitting a call (verify the capability token,
decide on current rows, record the call), re-checking a stream's authority between
chunks, and recording how the call ended (services.py); and the worker's client that
calls the gateway over HTTP through the effect ledger (client.py). The HTTP routes and
the provider keys live on the web side, in console/gateway/.

Routes, actions and resources (docs/api.md, "Credential gateway"):

    route (token audience)                  action       resource
    gateway:model/v1/chat/completions       model.call   model:<model>
    gateway:tools/<name>                    tool.call    tool:<name>/<path>
"""

MODEL_ROUTE = "gateway:model/v1/chat/completions"
MODEL_ACTION = "model.call"
TOOL_ACTION = "tool.call"


def tool_route(name: str) -> str:
    return f"gateway:tools/{name}"


def model_resource(model: str) -> str:
    return f"model:{model}"


def tool_resource(name: str, path: str) -> str:
    return f"tool:{name}/{path.lstrip('/')}"


def tool_call_piece(calls: dict[int, dict], index: int, piece: dict) -> None:
    """One streamed chunk's piece of function call `index`, added to `calls` (index ->
    the call as a whole reply would hold it): its id and name come first, its arguments in
    fragments. The gateway's record of a stream and the worker's client both read streams
    this way (console/gateway/streams.py, runtime/gateway/client.py)."""
    call = calls.setdefault(index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
    call["id"] = call["id"] or piece.get("id")
    function = piece.get("function") or {}
    call["function"]["name"] += function.get("name") or ""
    call["function"]["arguments"] += function.get("arguments") or ""
