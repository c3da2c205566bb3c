"""research.briefer: the research assistant again, written with the OpenAI Agents SDK and
run durably by StewardRunner (runtime/integrations/openai_agents/). Everything but the
Steward agent's body, the one line that replaces `Runner.run_sync`, is what its author
would write without Steward.

Under `make run` its model is the fake model behind the credential gateway: asked with the
search tool declared, it calls it with the question; given the tool's answer, it says
"tool said: ...". The task's page shows the journal: a model request, the search, a model
request.
"""

from __future__ import annotations

from agents import Agent, function_tool
from pydantic import BaseModel, Field

from console.dev.demo.assistant import NOTES
from runtime.agents import agent
from runtime.integrations.openai_agents import StewardRunner


@function_tool
def search_notes(query: str) -> list[str]:
    """Search the lab notes for `query`; the notes that match, or every note if none does."""
    words = query.lower().split()
    found = [note for topic, note in NOTES.items() if any(topic in word for word in words)]
    return found or list(NOTES.values())


briefer = Agent(
    name="briefer",
    instructions="You brief the team. Search the lab notes before you answer, and cite them.",
    model="fake-1",
    tools=[search_notes],
)


class BriefInput(BaseModel):
    prompt: str = Field(min_length=1, max_length=10_000)


@agent("research.briefer", pool="research", input=BriefInput, description="OpenAI Agents SDK agent, via StewardRunner")
def research_briefer(ctx, input):
    return StewardRunner.run_sync(briefer, input["prompt"], ctx=ctx).final_output
