"""What WebShop (in-process and in the browser) tells an LLM agent about itself (see
:mod:`aem_envs.core.brief`)."""

from __future__ import annotations

from aem_envs.core.brief import AgentBrief

BRIEF = AgentBrief(
    role="You are an expert agent shopping on a web store (WebShop).",
    action_hint=(
        "An action is search[your query] when a search bar is shown, or "
        "click[label] for one of the listed clickables."
    ),
    example_think="First find matching products.",
    example_action="search[blue wool socks]",
)
