"""ALFWorld (Shridhar et al. 2021) with bundled games: by default on a native re-implementation
of its engine (checked step for step against the real one), or on the real alfworld/textworld
engine with ``engine="upstream"``.

Modules, from data to environment:

- :mod:`~aem_envs.alfworld.pddl` — ALFRED-form PDDL problems, id mangling, name demangling,
  and the game dict textworld's PDDL env loads (the wheel's ``alfred.pddl`` + ``alfred.twl2``).
- :mod:`~aem_envs.alfworld.generate` — the seeded generator of the bundled games.
- :mod:`~aem_envs.alfworld.games` — bundled games and the real on-disk ALFWorld layout.
- :mod:`~aem_envs.alfworld.upstream` — the upstream engine (textworld ``PddlEnv`` + Fast
  Downward), the oracle.
- :mod:`~aem_envs.alfworld.native` — the fast path: ALFRED's text semantics in plain Python.
- :mod:`~aem_envs.alfworld.env` — :class:`ALFWorldEnv`, ``aem/ALFWorld-v0``.
"""
