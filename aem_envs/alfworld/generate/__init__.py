"""The seeded generator of the bundled ALFWorld games (``python -m aem_envs.alfworld.generate``).

Real ALFWorld games cannot be downloaded here, but the ``alfworld`` wheel ships what it
takes to build games of the same form: the receptacle sets (ids and interaction points) of
the 120 AI2-THOR floor plans, the object types of each plan, ALFRED's affordances and
what-fits-where tables, and the goal library (PDDL goals and instruction templates). A game
is a room built from one floor plan — every receptacle of the plan and one to three
instances of each object type it holds, as in ALFRED's scene randomisation — plus a goal
drawn for one of the six task types, written as an ALFRED-form PDDL problem.

Every game's plan is built by the expert (:mod:`~aem_envs.alfworld.expert`) and replayed on
the upstream engine; a game is kept only if the replay wins and every observation matches
the native engine's. Generation runs at development time (it needs the ``alfworld`` extra);
each game is seeded by its own (seed, split, task type, index), so any one can be rebuilt
alone to check the generator is deterministic.

Modules: :mod:`~aem_envs.alfworld.generate.build` builds and verifies one game;
``__main__`` runs the generator over every split and writes ``data/``.
"""
