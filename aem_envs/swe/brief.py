"""What the SWE env tells an LLM agent about itself (see :mod:`aem_envs.core.brief`)."""

from __future__ import annotations

from aem_envs.core.brief import AgentBrief

BRIEF = AgentBrief(
    role=(
        "You are an expert software engineer fixing an issue in a repository "
        "inside a sandbox (SWE-bench)."
    ),
    action_hint=(
        "An action is one command run in the repository; the observation shows its "
        "output. Finish by submitting your change as the environment describes."
    ),
    example_think="Find where the function is defined.",
    example_action='grep -rn "def parse" .',
)
