"""An agent's name is its identity in URLs, grants (agent:<name>) and the API: it is
checked when the agent is declared, before anything is registered."""

import pytest

from runtime.agents import agent


@pytest.mark.parametrize(
    "name",
    [
        "",
        "x" * 201,
        "line\nbreak",
        "tab\there",
        "research/batch",  # its page, /agents/<name>/, could not be routed or linked to
        "/",
        None,
        42,
    ],
    ids=["empty", "201-chars", "newline", "tab", "slash", "only-slash", "none", "int"],
)
def test_a_name_that_could_not_be_shown_or_routed_is_refused_at_declaration(name):
    with pytest.raises(ValueError, match="1-200 printable characters"):
        agent(name)


@pytest.mark.parametrize("name", ["research.batch", "x" * 200, "naïve agent", "a:b-c_d"])
def test_printable_names_up_to_200_characters_are_accepted(name):
    assert callable(agent(name))  # the decorator; nothing is registered until it is applied
