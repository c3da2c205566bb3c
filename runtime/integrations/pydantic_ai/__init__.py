"""Pydantic AI agents under Steward (the `pydantic-ai` extra): StewardAgent wraps a plain
`pydantic_ai.Agent` and registers it as a Steward agent (runtime/integrations/pydantic_ai/agent.py)."""

try:
    import pydantic_ai  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is installed in development
    raise ImportError("StewardAgent needs Pydantic AI: pip install 'steward[pydantic-ai]'") from exc

from runtime.integrations.pydantic_ai.agent import StewardAgent, idempotency_key

__all__ = ["StewardAgent", "idempotency_key"]
