"""research.assistant: a research assistant written in plain Pydantic AI, run durably by
StewardAgent (runtime/integrations/pydantic_ai/); research.reporter: its colleague, who
sends a report only once a person approved it. Everything but the StewardAgent lines is
what their author would write without Steward.

Under `make run` its model is the fake model behind the credential gateway
(console/dev/demo/fake_model.py): asked with the search tool declared, it calls it with
the question; given the tool's answer, it says "tool said: ...". The task's page shows
the journal: a model request, the search, a model request. The fake model calls an
agent's first tool only, so the report is another agent's: its `send_report` requires
approval, so its call waits in the approvals inbox (the seeded one is dave's, for alice
to decide), then goes to the keyed fake service through the effect ledger.
"""

from __future__ import annotations

import os

from pydantic_ai import Agent

from console.dev.demo import fake_service
from runtime.errors import EffectNotApplied
from runtime.integrations.pydantic_ai import StewardAgent, idempotency_key

RESULTS_URL = os.environ.get("STEWARD_DEMO_RESULTS_URL", "http://127.0.0.1:8765")

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

reporter = Agent(
    "openai:fake-1",
    instructions="Send the team a short report of what you found.",
    defer_model_check=True,
)


@reporter.tool_plain(requires_approval=True)
def send_report(report: str) -> dict:
    """Send `report` to the team's results service, once a person has approved it."""
    try:
        return fake_service.call(RESULTS_URL, {"report": report}, key=idempotency_key(), timeout=30)
    except fake_service.ServiceRejected as exc:
        raise EffectNotApplied(str(exc)) from exc  # the service says it did not act


StewardAgent(
    reporter,
    name="research.reporter",
    pool="research",
    effects={"send_report": {"effect_class": "idempotent", "keyed": True}},
)
