#!/usr/bin/env bash
# The static checks CI runs before the tests: lint, formatting, spelling, types, the import
# layers (the import-linter contract in pyproject.toml).
# Exits non-zero on the first finding; the same tools and versions as .pre-commit-config.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
echo "==> ruff check";    "$bin/ruff" check .
echo "==> ruff format";   "$bin/ruff" format --check .
echo "==> codespell";     "$bin/codespell"
echo "==> mypy";          "$bin/mypy"
# The checkout itself, whatever an installed aem points at.
echo "==> import layers"; PYTHONPATH="$PWD" "$bin/lint-imports" --no-cache --no-logo
