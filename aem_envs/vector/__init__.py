"""Envs in Ray actors: :func:`make_ray_vec` (a Gymnasium vector env), :func:`make_ray_env` (one
env behind a local ``gym.Env``) and the pieces they share.

Importing this package needs no Ray; making an env does (``pip install 'aem[scale]'``).
See ``docs/scaling.md``, "Ray env workers".
"""

from aem_envs.vector.cluster import LOCAL, RayActorFailed, RayConnectError
from aem_envs.vector.ray_env import RayEnv, make_ray_env
from aem_envs.vector.ray_vec import RayVectorEnv, make_ray_vec

__all__ = [
    "LOCAL",
    "RayActorFailed",
    "RayConnectError",
    "RayEnv",
    "RayVectorEnv",
    "make_ray_env",
    "make_ray_vec",
]
