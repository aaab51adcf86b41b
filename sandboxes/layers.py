"""What goes into each image layer: recipes, tags and build contexts, whichever backend builds.

Nothing is pulled from a registry. The layers, each tagged by a hash of everything that
goes into it so a tag is built once and reused until its inputs change:

- ``aem-sandbox/base:<hash>`` — ``debootstrap --variant=minbase`` of the host's Debian release
  with the packages in ``recipes/base-packages.txt`` (python3, venv, pip, git, patch, pytest).
- ``aem-sandbox/env:<hash>`` — ``recipes/Dockerfile.env``: extra Python packages installed from
  local wheel files with ``pip --no-index``.
- ``aem-sandbox/instance:<hash>`` — ``recipes/Dockerfile.instance``: a repository cloned from a
  ``git bundle`` to ``/testbed``, checked out at the base commit, plus setup commands.

A tag does not depend on the backend that builds it: :mod:`sandboxes.docker_images` builds a
:class:`Layer` as a Docker image, :mod:`sandboxes.rootfs` as a root file system for
bubblewrap, from the same build context and script.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import SandboxDataError, SandboxError

RECIPES = Path(__file__).with_name("recipes")
REPOSITORY = "aem-sandbox"
#: Docker label naming a layer's kind (base, env, instance), for listing and pruning.
KIND_LABEL = "aem.sandbox.kind"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Debian major version → suite, for hosts whose os-release lacks VERSION_CODENAME.
_SUITES = {"11": "bullseye", "12": "bookworm", "13": "trixie", "14": "forky"}

Progress = Callable[[str], None]


def stderr_progress(line: str) -> None:
    """Default progress display: one prefixed line per build step on stderr."""
    print(f"[aem sandbox] {line}", file=sys.stderr, flush=True)


def reporter(progress: Progress | None) -> Progress:
    """The display to call: ``progress``, or one that shows nothing when it is None."""
    return progress or (lambda _line: None)


def debian_suite() -> str:
    """The running Debian release's suite name, read from the host (``$AEM_DEBIAN_SUITE`` wins)."""
    override = os.environ.get("AEM_DEBIAN_SUITE")
    if override:
        return override
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            key, _, value = line.partition("=")
            if key == "VERSION_CODENAME" and value.strip('"'):
                return value.strip('"')
    with contextlib.suppress(OSError):
        major = Path("/etc/debian_version").read_text().strip().split(".")[0]
        if major in _SUITES:
            return _SUITES[major]
    raise SandboxError(
        "cannot tell which Debian release to debootstrap (no VERSION_CODENAME in "
        "/etc/os-release, no known /etc/debian_version); set AEM_DEBIAN_SUITE, e.g. bookworm"
    )


def debian_mirror() -> str:
    """The Debian mirror debootstrap downloads from (``$AEM_DEBIAN_MIRROR``)."""
    return os.environ.get("AEM_DEBIAN_MIRROR", DEFAULT_MIRROR)


def base_packages() -> list[str]:
    lines = (RECIPES / "base-packages.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def digest(*parts: str | bytes) -> str:
    """A short hash of ``parts``, each length-prefixed so that no two sequences collide."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()[:16]


def _file_digest(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def base_tag() -> str:
    """The tag the base image has for this host's release and the current recipe."""
    recipe = [(RECIPES / name).read_text() for name in ("base-packages.txt", "gitconfig.txt")]
    return f"{REPOSITORY}/base:{digest(debian_suite(), debian_mirror(), *recipe)}"


@dataclass(frozen=True)
class Layer:
    """One image layer, buildable by Docker (a Dockerfile) or by bubblewrap (its script).

    ``fill`` writes the build context; ``script`` is the recipe script's name in the context
    and its arguments after the context path, exactly what the Dockerfile's RUN line runs.
    """

    tag: str
    kind: str
    parent: str
    dockerfile: str
    fill: Callable[[Path], None]
    buildargs: dict[str, str]
    script: list[str]


def wheel_files(wheels: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """``wheels`` as paths, each checked to be a local ``.whl`` file."""
    files = [Path(w) for w in wheels]
    for path in files:
        if not path.is_file() or path.suffix != ".whl":
            raise SandboxDataError(f"{path} is not a wheel file; pass paths of local .whl files")
    return files


def env_layer(base: str, files: Sequence[Path], requirements: Sequence[str]) -> Layer:
    """The layer that installs ``requirements`` from the wheel ``files`` only (all of them
    when there are no requirements) on top of ``base``."""
    dockerfile = (RECIPES / "Dockerfile.env").read_text()
    script = (RECIPES / "install-wheels.sh").read_text()
    tag = f"{REPOSITORY}/env:" + digest(
        base,
        dockerfile,
        script,
        *sorted(f"{p.name}={_file_digest(p)}" for p in files),
        *requirements,
    )

    def fill(context: Path) -> None:
        (context / "wheels").mkdir()
        for path in files:
            shutil.copyfile(path, context / "wheels" / path.name)
        (context / "requirements.txt").write_text("".join(f"{line}\n" for line in requirements))
        shutil.copyfile(RECIPES / "install-wheels.sh", context / "install-wheels.sh")

    return Layer(tag, "env", base, dockerfile, fill, {"BASE_IMAGE": base}, ["install-wheels.sh"])


def bundle_file(bundle: str | os.PathLike[str], commit: str) -> Path:
    """``bundle`` as a path, checked to exist, and ``commit`` checked to look like a commit."""
    path = Path(bundle)
    if not path.is_file():
        raise SandboxDataError(f"git bundle {path} does not exist; create one with `git bundle`")
    if not commit or any(ch.isspace() for ch in commit):
        raise SandboxDataError(f"base commit {commit!r} is not a commit id")
    return path


def instance_layer(parent: str, bundle: Path, commit: str, setup_commands: Sequence[str]) -> Layer:
    """The layer with ``bundle``'s repository at ``/testbed``, checked out at ``commit``, and
    ``setup_commands`` run there; its tag hashes the bundle's bytes, the commit, the commands
    and ``parent``."""
    dockerfile = (RECIPES / "Dockerfile.instance").read_text()
    checkout = (RECIPES / "checkout.sh").read_text()
    setup = "".join(f"{command}\n" for command in setup_commands)
    tag = f"{REPOSITORY}/instance:" + digest(
        parent, dockerfile, checkout, _file_digest(bundle), commit, setup
    )

    def fill(context: Path) -> None:
        prune_bundle(bundle, commit, context / "repo.bundle")
        shutil.copyfile(RECIPES / "checkout.sh", context / "checkout.sh")
        (context / "setup.sh").write_text(setup)

    buildargs = {"ENV_IMAGE": parent, "BASE_COMMIT": commit}
    return Layer(tag, "instance", parent, dockerfile, fill, buildargs, ["checkout.sh", commit])


def prune_bundle(bundle: Path, commit: str, target: Path) -> None:
    """Write to ``target`` a git bundle of ``commit`` and its ancestors, and nothing else.

    Why: a bundle made with ``--all`` carries every branch, tag and later commit, the fix
    included. The build context (hence a Docker image's ``COPY`` layer) gets only this pruned
    bundle, and ``recipes/checkout.sh`` leaves no ref, reflog or unreachable object in the
    clone, so the agent cannot read the future from ``git log --all`` or loose objects.
    Runs the host's ``git``.
    """
    git = shutil.which("git")
    if git is None:
        raise SandboxError(
            "git is not installed on this host; instance images are built from git bundles "
            "with it (apt-get install git)"
        )
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}

    def run(*args: str) -> str:
        done = subprocess.run(
            [git, *args], capture_output=True, text=True, env=environment, check=False
        )
        if done.returncode != 0:
            raise SandboxError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout.strip()

    with tempfile.TemporaryDirectory(prefix="aem-bundle-") as tmp:
        repo = str(Path(tmp) / "repo.git")
        run("clone", "--quiet", "--bare", str(bundle), repo)
        probe = subprocess.run(
            [git, "-C", repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
            capture_output=True,
            text=True,
            env=environment,
            check=False,
        )
        if probe.returncode != 0:
            raise SandboxDataError(
                f"git bundle {bundle} does not hold the base commit {commit}; create the "
                "bundle from a clone that has it (git bundle create FILE --all)"
            )
        run("-C", repo, "update-ref", "refs/heads/aem-base", probe.stdout.strip())
        run("-C", repo, "bundle", "create", "--quiet", str(target), "refs/heads/aem-base")
