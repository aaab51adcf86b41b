"""SWE-bench-style repository tasks in a sandbox, graded with swebench's own code.

Modules, by role (the same names in every env package):

- :mod:`~aem_envs.swe.env` — :class:`SWEEnv`, ``aem/SWE-v0``.
- :mod:`~aem_envs.swe.tasks` — where instances come from (the bundled tasks in ``data/``,
  or a file in swebench's format) and the image each one runs in.
- :mod:`~aem_envs.swe.grading` — grading a diff in a fresh sandbox with swebench's code.
- :mod:`~aem_envs.swe.expert` — the expert: the gold patch, through the env's own actions.
- :mod:`~aem_envs.swe.generate` — the generator of ``data/`` from the repositories in
  ``generate/repos/`` (``python -m aem_envs.swe.generate``, ``--check`` to verify).
- ``data/`` — the bundled instances (``instances.jsonl``) and their repositories as git
  bundles.

Engine modules:

- :mod:`~aem_envs.swe.editor` — the file editor behind ``edit {json}``.
- :mod:`~aem_envs.swe.evalscript` — eval scripts for instances that carry none.
- :mod:`~aem_envs.swe.integrity` — what keeps grading to the agent's source changes and the
  harness's own output (with ``restore.sh``).
"""

from aem_envs.swe.env import SWEEnv

__all__ = ["SWEEnv"]
