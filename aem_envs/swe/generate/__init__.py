"""Generator of the bundled SWE tasks: repositories, git bundles and the instances file.

Each repository under ``repos/<name>/`` is kept in its *fixed* state (every test passes) with
a ``tasks.yaml`` that says how to break it: each instance names exact text substitutions
(``fixed`` → ``buggy``) and a block of tests in the test files, delimited by
``# aem-task: <number>`` / ``# aem-task-end``. The generator commits the broken code without
those blocks (fixed author, dates and messages, so commit ids never change), derives each
instance's gold ``patch`` and ``test_patch`` as git diffs, and runs the real eval script on a
checkout to find ``FAIL_TO_PASS`` and ``PASS_TO_PASS``. Run it with
``python -m aem_envs.swe.generate`` (``--check`` verifies the shipped files instead).
"""
