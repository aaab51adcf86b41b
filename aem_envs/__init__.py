"""aem environments: Gymnasium text environments for agentic RL.

Importing this package registers every environment id, so that
``gym.make("aem_envs:aem/ALFWorld-v0")`` works from any project without a prior import.
"""

from aem_envs.core.base import TextEnv
from aem_envs.core.errors import AEMError, DataError, MissingDependencyError
from aem_envs.core.outcome import Outcome, Task
from aem_envs.core.rewards import RewardScheme
from aem_envs.core.spaces import TextSpace
from aem_envs.registration import ENTRIES, register_envs

__all__ = [
    "ENTRIES",
    "AEMError",
    "DataError",
    "MissingDependencyError",
    "Outcome",
    "RewardScheme",
    "Task",
    "TextEnv",
    "TextSpace",
]

register_envs()
