"""research.assistant: a research assistant written in plain Pydantic AI, run durably by
StewardAgent (runtime/integrations/pydantic_ai/). Everything above the last line is what
its author would write without Steward; the last line is the whole difference.

Under `make run` its model is the fake model behind the credential gateway
(console/dev/demo/fake_model.py): asked with the search tool declared, it calls it with
the question; given the tool's answer, it says "tool said: ...". The task's page shows
the journal: a model request, the search, a model request.
"""

from __future__ import annotations

from pydantic_ai import Agent

from runtime.integrations.pydantic_ai import StewardAgent

# The notes the search tool reads: the demo's stand-in for a search service.
NOTES = {
    "warmup": "Linear warmup over the first 5% of steps removed the early loss spikes.",
    "cosine": "Cosine decay to 10% of the peak rate finished 8% lower than step decay.",
    "batch": "Doubling the batch size with the same rate changed the final loss by under 1%.",
}

assistant = Agent(
    "openai:fake-1",
    instructions="You are a research assistant. Search the lab notes before you answer, and cite them.",
    defer_model_check=True,  # the model is reached through Steward's gateway, with no key here
)


@assistant.tool_plain
def search(query: str) -> list[str]:
    """Search the lab notes for `query`; the notes that match, or every note if none does."""
    words = query.lower().split()
    found = [note for topic, note in NOTES.items() if any(topic in word for word in words)]
    return found or list(NOTES.values())


StewardAgent(assistant, name="research.assistant", pool="research")
