"""ALFWorld (Shridhar et al. 2021) with bundled games: by default on a native re-implementation
of its engine (checked step for step against the real one), or on the real alfworld/textworld
engine with ``engine="upstream"``.

Modules, by role (the same names in every env package):

- :mod:`~aem_envs.alfworld.env` — :class:`ALFWorldEnv`, ``aem/ALFWorld-v0``.
- :mod:`~aem_envs.alfworld.tasks` — where games come from: the bundled set in ``data/``, or
  the real ALFWorld layout on disk.
- :mod:`~aem_envs.alfworld.grading` — when a game is won (the goal library's formulas).
- :mod:`~aem_envs.alfworld.expert` — the expert, planning from the native engine's state.
- :mod:`~aem_envs.alfworld.generate` — the seeded generator of ``data/``
  (``python -m aem_envs.alfworld.generate``).
- ``data/`` — the bundled games, one gzipped JSON-lines file per split, and their counts.

Engine modules:

- :mod:`~aem_envs.alfworld.pddl` — ALFRED-form PDDL problems, id mangling, name demangling,
  and the game dict textworld's PDDL env loads (the wheel's ``alfred.pddl`` + ``alfred.twl2``).
- :mod:`~aem_envs.alfworld.state` — a game's layout and state, parsed from its PDDL problem.
- :mod:`~aem_envs.alfworld.native` — the fast path: ALFRED's text semantics in plain Python.
- :mod:`~aem_envs.alfworld.upstream` — the upstream engine (textworld ``PddlEnv`` + Fast
  Downward), the oracle.

For agents: :mod:`~aem_envs.alfworld.brief` — what ALFWorld tells an LLM agent about itself;
:mod:`~aem_envs.alfworld.memory` — what an agent has learnt of the room from the episode's
text (places searched, places left, what it holds), the brief's memory for
``aem_agent.prompts``' compact style.
"""

from aem_envs.alfworld.env import ALFWorldEnv

__all__ = ["ALFWorldEnv"]
