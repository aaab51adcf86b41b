"""Turn a free-form LLM reply into an environment action.

The envs take plain action strings so that non-LLM agents can use them; this wrapper reads
the action out of a model's reply with the reply format (:mod:`aem_envs.reply`). A reply
with no action is an invalid action, never an exception.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from aem_envs.reply import REPLY_FORMAT, ReplyFormat


class LLMActionWrapper(gym.Wrapper[str, str, str, str], gym.utils.RecordConstructorArgs):
    """Accepts raw model replies as actions; adds ``parsed_action``/``think`` to ``info``.

    A reply without a valid action takes the env's invalid-action path (penalty, step
    count, step limit) through ``reject`` (:meth:`aem_envs.TextEnv.reject`), looked up with
    ``get_wrapper_attr`` so that a wrapper between this one and the env that defines
    ``reject`` itself (:class:`~aem_envs.wrappers.TrajectoryRecorder`) sees the rejection.

    Example::

        >>> import gymnasium as gym
        >>> import aem_envs
        >>> from aem_envs.wrappers import LLMActionWrapper
        >>> env = LLMActionWrapper(gym.make("aem_envs:aem/ALFWorld-v0"))
        >>> _ = env.reset(seed=0)
        >>> _, reward, _, _, info = env.step("I would look around.")
        >>> info["action_valid"], info["parsed_action"], reward
        (False, None, -0.1)
    """

    def __init__(self, env: gym.Env[str, str], reply_format: ReplyFormat | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, reply_format=reply_format)
        gym.Wrapper.__init__(self, env)
        self.reply_format = reply_format or REPLY_FORMAT
        if not hasattr(env.unwrapped, "reject"):
            raise TypeError("LLMActionWrapper needs an aem environment (aem_envs.TextEnv)")

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        parsed = self.reply_format.parse(action)
        if parsed.action is None:
            reject = self.env.get_wrapper_attr("reject")
            obs, reward, terminated, truncated, info = reject(f"Invalid action: {parsed.error}.")
        else:
            obs, reward, terminated, truncated, info = self.env.step(parsed.action)
        info = {**info, "parsed_action": parsed.action, "think": parsed.think}
        return obs, reward, terminated, truncated, info
