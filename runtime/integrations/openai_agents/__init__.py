"""OpenAI Agents SDK agents under Steward (the `openai-agents` extra): StewardRunner runs a
plain `agents.Agent` durably from a Steward agent's body (runtime/integrations/openai_agents/runner.py)."""

try:
    import agents  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is installed in development
    raise ImportError("StewardRunner needs the OpenAI Agents SDK: pip install 'steward[openai-agents]'") from exc

from runtime.integrations.openai_agents.runner import StewardRunner, idempotency_key

__all__ = ["StewardRunner", "idempotency_key"]
