# The developer loop (CONTRIBUTING.md). Every target uses the tools in .venv, which
# `bash scripts/install.sh` creates.
PY := .venv/bin/python
FAST := not slow and not docker and not bwrap and not browser

.PHONY: install check test-fast test ci

install:  ## everything, as the README's first command does (root, Debian)
	bash scripts/install.sh

check:  ## ruff check, ruff format --check, codespell, mypy, import layers: what CI runs first
	bash scripts/check.sh

test-fast:  ## the tests that need no Docker engine, bubblewrap or browser, and no slow ones
	$(PY) -m pytest -m "$(FAST)" -q

test:  ## the README's test command: the whole suite
	$(PY) -m pytest

ci:  ## what CI runs on a fresh clone
	bash .ci/run
