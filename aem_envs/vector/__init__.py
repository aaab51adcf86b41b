"""Envs in Ray actors: :func:`make_ray_vec` (a Gymnasium vector env) and the pieces it uses.

Importing this package needs no Ray; making an env does (``pip install 'aem[scale]'``).
See ``docs/scaling.md``, "Ray env workers".
"""

from aem_envs.vector.ray_vec import RayVectorEnv, make_ray_vec

__all__ = ["RayVectorEnv", "make_ray_vec"]
