"""The OpenEnv message types of a served text env, shared by the server and the client.

OpenEnv's serializer sends an observation's own fields and drops its ``metadata``, so
everything a Gymnasium ``step`` returns is a field here: the text, both end flags and the
``info`` dict. The session's :class:`TextEnvState` describes the env's spaces, which is how
the client builds spaces equal to the remote env's before its first ``reset``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictStr

from aem_envs.core.errors import ArgumentError, require
from aem_envs.core.spaces import TextSpace

_types = require("scale", "openenv.core.env_server.types", feature="aem serve / aem/Remote-v0")


class TextAction(_types.Action):  # type: ignore[name-defined]
    """One action of a text env: the string its ``step`` takes (anything else is a 4xx)."""

    text: StrictStr = Field(description="the action string passed to env.step")


class TextObservation(_types.Observation):  # type: ignore[name-defined]
    """What ``reset`` or ``step`` returned; ``done`` (OpenEnv's flag) is either end flag."""

    text: str = Field(description="the observation string")
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict, description="the info dict, as JSON")


class TextEnvState(_types.State):  # type: ignore[name-defined]
    """The session's env: its id and its two text spaces (see :func:`space_spec`)."""

    env_id: str
    observation_space: dict[str, Any]
    action_space: dict[str, Any]


def space_spec(space: Any) -> dict[str, Any]:
    """A :class:`TextSpace` as JSON; any other space cannot cross the wire as text."""
    if not isinstance(space, TextSpace):
        raise ArgumentError(
            f"only text envs can be served (TextSpace observations and actions), got "
            f"{type(space).__name__}; serve an aem id from `aem envs`"
        )
    return {
        "max_length": space.max_length,
        "min_length": space.min_length,
        "vocabulary": list(space.vocabulary),
    }


def space_from_spec(spec: dict[str, Any]) -> TextSpace:
    return TextSpace(
        int(spec["max_length"]),
        min_length=int(spec["min_length"]),
        vocabulary=tuple(spec["vocabulary"]),
    )
