"""One step limit per episode, whether given as ``max_steps=`` or as ``gym.make``'s
``max_episode_steps=``.

``gym.make(id, max_episode_steps=N)`` wraps the env in a ``TimeLimit`` and never tells the
env. An aem env ends its episodes itself at its own limit (SWE grades the work there), so a
``TimeLimit`` above it with a larger N would never be reached, and a smaller one would cut
the episode without grading it. Every aem id is therefore registered with
:class:`AdoptTimeLimit` as an additional wrapper: it finds the ``TimeLimit`` beneath it and
hands N to the env, which then ends the episode at exactly step N, grading included.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import WrapperSpec
from gymnasium.wrappers import TimeLimit


class AdoptTimeLimit(gym.Wrapper[str, str, str, str], gym.utils.RecordConstructorArgs):
    """Passes the limit of a ``TimeLimit`` beneath it to the aem env it wraps."""

    def __init__(self, env: gym.Env[str, str]) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        limit = time_limit_of(env)
        adopt = getattr(env.unwrapped, "adopt_step_limit", None)
        if limit is not None and adopt is not None:
            adopt(limit)


def time_limit_of(env: gym.Env[Any, Any]) -> int | None:
    """``max_episode_steps`` of the outermost ``TimeLimit`` in ``env``'s wrapper chain."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, TimeLimit):
            return int(env._max_episode_steps)
        env = env.env
    return None


#: The wrapper spec every aem id is registered with (see the module docstring).
ADOPT_TIME_LIMIT = WrapperSpec(
    name="AdoptTimeLimit", entry_point=f"{__name__}:AdoptTimeLimit", kwargs={}
)
