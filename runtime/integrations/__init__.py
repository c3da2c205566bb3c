"""Agents written with other frameworks, run durably under Steward.

Each integration wraps a framework's agent so that its model requests and tool calls go
through the agent's Context (ctx.model, ctx.step, ctx.effect), and only through it: it
never imports the runtime's packages, the same rule agent code keeps. The frameworks are
optional extras in pyproject.toml; importing an integration without its extra raises
ImportError naming the extra.
"""
