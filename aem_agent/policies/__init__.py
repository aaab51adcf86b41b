"""Policies: anything that turns a batch of agent turns into replies.

Model-backed policies import torch/transformers only when built, so this package is cheap to
import for the expert, random and remote-endpoint policies.
"""

from aem_agent.policies.base import Policy, PolicyInput, PolicyOutput
from aem_agent.policies.hf import HFPolicy
from aem_agent.policies.loader import SPEC_FORMS, load_policy
from aem_agent.policies.openai_compat import EndpointError, OpenAIPolicy
from aem_agent.policies.scripted import ScriptedPolicy

__all__ = [
    "SPEC_FORMS",
    "EndpointError",
    "HFPolicy",
    "OpenAIPolicy",
    "Policy",
    "PolicyInput",
    "PolicyOutput",
    "ScriptedPolicy",
    "load_policy",
]
