"""Reaching Ray and making env actors: what the vector env and the single-env proxy share.

Ray is optional (the ``scale`` extra), so it is imported here, on first use, with an
install hint instead of a traceback when it is missing.
"""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any

from aem_envs.core.errors import AEMError, require
from aem_envs.vector.worker import EnvWorker

#: Per-actor resources unless the caller says otherwise. A text env's process idles while
#: the policy thinks, so a quarter CPU each lets a 2-core machine hold 8 envs; an env whose
#: step is heavy (a browser, tests in a container) should ask for a whole core or more.
DEFAULT_ACTOR_OPTIONS: dict[str, Any] = {"num_cpus": 0.25}

#: Seconds one call to an actor (make, reset, step, close) may take before the actor is
#: treated as dead. Generous: an SWE step runs a test suite.
DEFAULT_CALL_TIMEOUT_S = 600.0


class RayActorFailed(AEMError):
    """An env actor died, or did not answer in time, twice in a row where no episode can
    absorb it (making the env, resetting it)."""


def ray_module() -> ModuleType:
    """The ``ray`` package, or one line saying how to install it."""
    return require("scale", "ray", feature="Ray env workers (aem_envs.vector, --ray)")


def connect(address: str | None) -> bool:
    """Make sure this process is a Ray driver; whether this call started Ray.

    ``address=None`` starts a private local Ray on loopback (no dashboard) unless this
    process is already connected; any other address (``"auto"``, ``"HOST:6379"``,
    ``"ray://HOST:10001"``) is handed to ``ray.init``. The caller that started Ray is the
    one that shuts it down.
    """
    ray = ray_module()
    if ray.is_initialized():
        return False
    if address is None:
        ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1")
    else:
        ray.init(address=address)
    return True


def spawn(
    env_id: str,
    env_kwargs: dict[str, Any],
    actor_options: dict[str, Any] | None,
    *,
    autoreset: bool,
) -> Any:
    """A new actor holding ``gym.make(env_id, **env_kwargs)`` (it starts in the background)."""
    ray = ray_module()
    options = {**DEFAULT_ACTOR_OPTIONS, **(actor_options or {})}
    return ray.remote(EnvWorker).options(**options).remote(env_id, env_kwargs, autoreset)


def failure_types() -> tuple[type[BaseException], ...]:
    """The errors that mean "this actor is gone or stuck", as opposed to an env's own error
    (which is raised to the caller, as ``AsyncVectorEnv`` raises a worker's error)."""
    ray = ray_module()
    return (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError)


def kill(actor: Any) -> None:
    """Stop ``actor`` for good (no restart); an actor that is already gone is fine."""
    ray = ray_module()
    with contextlib.suppress(ray.exceptions.RayError):
        ray.kill(actor, no_restart=True)
