"""Build a policy from a one-word spec, the form the CLI and configs use."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from aem_agent.policies.base import Policy
from aem_agent.policies.hf import HFPolicy
from aem_agent.policies.openai_compat import OpenAIPolicy
from aem_agent.policies.scripted import ScriptedPolicy
from aem_envs.core.errors import ArgumentError
from aem_envs.policies import POLICIES
from aem_envs.reply import REPLY_FORMAT

SPEC_FORMS = (
    "expert",
    "random",
    "smollm2",
    "aem-ref",
    "hf:<checkpoint directory>",
    "openai:<model>@<base url>",
)

#: What ``smollm2`` replies start with unless ``reply_prefix`` is given. The 135M model
#: rarely writes an action by itself; pre-filling the action tag makes it write one.
SMOLLM2_REPLY_PREFIX = REPLY_FORMAT.action_open

_OPENAI = re.compile(r"^openai:(?P<model>.+?)@(?P<url>https?://.+)$")


def check_spec(spec: str) -> None:
    """Refuse, in one line, a spec of no known form or an ``hf:`` path that is no directory.

    Cheap (nothing is loaded), so the CLI checks every spec before it builds an env.
    """
    if spec in ("expert", "random", "smollm2", "aem-ref") or _OPENAI.match(spec):
        return
    if spec.startswith("hf:") and spec[3:]:
        if not Path(spec[3:]).expanduser().is_dir():
            raise ArgumentError(f"{spec}: no checkpoint directory {spec[3:]!r}")
        return
    raise ArgumentError(f"unknown policy {spec!r}; use one of: {', '.join(SPEC_FORMS)}")


def load_policy(spec: str, **kwargs: Any) -> Policy:
    """The policy named by ``spec``; ``kwargs`` go to its constructor.

    Forms: ``expert`` and ``random`` (the env's own agents), ``smollm2`` (the bundled model,
    converted on first use), ``aem-ref`` (the bundled reference agent, SmolLM2 with its
    trained adapter: ``aem_agent/reference/README.md``), ``hf:<path>`` (a local checkpoint
    directory, e.g. one written by ``aem train``), ``openai:<model>@<base url>`` (an
    OpenAI-compatible server such as vLLM, e.g.
    ``openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1``).
    """
    check_spec(spec)
    if spec in POLICIES:
        return ScriptedPolicy(POLICIES[spec](**kwargs))
    if spec == "smollm2":
        # The 135M model rarely opens the reply format by itself; starting it does the rest.
        return HFPolicy(None, **{"reply_prefix": SMOLLM2_REPLY_PREFIX, **kwargs})
    if spec == "aem-ref":
        from aem_agent.models.bundled import reference_checkpoint

        return HFPolicy(reference_checkpoint(), **kwargs)
    if spec.startswith("hf:") and spec[3:]:
        return HFPolicy(spec[3:], **kwargs)
    match = _OPENAI.match(spec)
    assert match is not None  # check_spec admitted it
    return OpenAIPolicy(match["url"], match["model"], **kwargs)
