"""Offline sandbox images: base (debootstrap), environment (local wheels), instance (git bundle).

Nothing is pulled from a registry. The layers, each tagged by a hash of everything that
goes into it so a tag is built once and reused until its inputs change:

- ``aem-sandbox/base:<hash>`` — ``debootstrap --variant=minbase`` of the host's Debian release
  with the packages in ``recipes/base-packages.txt`` (python3, venv, pip, git, patch, pytest),
  imported with ``docker import``. The root filesystem stays cached on disk, because the
  bubblewrap backend runs on it directly.
- ``aem-sandbox/env:<hash>`` — ``recipes/Dockerfile.env``: extra Python packages installed from
  local wheel files with ``pip --no-index``.
- ``aem-sandbox/instance:<hash>`` — ``recipes/Dockerfile.instance``: a repository cloned from a
  ``git bundle`` to ``/testbed``, checked out at the base commit, plus setup commands.

Dockerfiles use the legacy builder's syntax (no heredocs, no buildx) and build with
``network_mode="none"``; only debootstrap talks to the Debian mirror. Builds hold a file
lock, so concurrent processes wait for one build instead of racing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import SandboxError
from .docker_sandbox import client_session
from .errors import SandboxDataError
from .owner import current_owner

RECIPES = Path(__file__).with_name("recipes")
REPOSITORY = "aem-sandbox"
KIND_LABEL = "aem.sandbox.kind"
# File at the top of a layer root file system built without Docker; holds the tag.
LAYER_MARK = ".aem-layer"
# In an exported root file system: the id of the Docker image it was unpacked from.
_EXPORT_MARK = ".aem-image-id"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Debian major version → suite, for hosts whose os-release lacks VERSION_CODENAME.
_SUITES = {"11": "bullseye", "12": "bookworm", "13": "trixie", "14": "forky"}
_IMAGE_ENV = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
)

Progress = Callable[[str], None]


def stderr_progress(line: str) -> None:
    """Default progress display: one prefixed line per build step on stderr."""
    print(f"[aem sandbox] {line}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    """Where root filesystems and build locks live: ``$AEM_SANDBOX_CACHE``, else
    ``sandboxes/`` under aem's cache root (``$AEM_CACHE_DIR``, else ``$XDG_CACHE_HOME/aem``,
    else ``~/.cache/aem``), the same root the model cache uses."""
    override = os.environ.get("AEM_SANDBOX_CACHE")
    if override:
        return Path(override).expanduser()
    root = os.environ.get("AEM_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "sandboxes"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "aem" / "sandboxes"


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


def base_packages() -> list[str]:
    lines = (RECIPES / "base-packages.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()[:16]


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _mirror() -> str:
    return os.environ.get("AEM_DEBIAN_MIRROR", DEFAULT_MIRROR)


def base_tag() -> str:
    """The tag the base image has for this host's release and the current recipe."""
    recipe = [(RECIPES / name).read_text() for name in ("base-packages.txt", "gitconfig.txt")]
    return f"{REPOSITORY}/base:{_digest(debian_suite(), _mirror(), *recipe)}"


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with (root / "build.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def rootfs_path(tag: str) -> Path:
    """Where the root file system of ``tag`` is cached for the bubblewrap backend."""
    return cache_dir() / "rootfs" / tag.replace("/", "_").replace(":", "_")


def base_rootfs_path() -> Path:
    """Directory of the debootstrap root file system of the current base tag."""
    return rootfs_path(base_tag())


def ensure_base_rootfs(progress: Progress | None = stderr_progress) -> Path:
    """Build (once) and return the cached debootstrap root filesystem of the base image.

    Needs root and the ``debootstrap`` package; downloads Debian packages from the mirror
    (``$AEM_DEBIAN_MIRROR``, default deb.debian.org) — the only network access of any build.
    """
    target = base_rootfs_path()
    if (target / "usr" / "bin" / "python3").exists():
        return target
    with _build_lock():
        if (target / "usr" / "bin" / "python3").exists():
            return target
        _debootstrap(target, progress or (lambda _line: None))
    return target


def _debootstrap(target: Path, progress: Progress) -> None:
    tool = shutil.which("debootstrap") or next(
        (p for p in ("/usr/sbin/debootstrap",) if os.path.exists(p)), None
    )
    if tool is None:
        raise SandboxError("debootstrap is not installed; install it: apt-get install debootstrap")
    if os.geteuid() != 0:
        raise SandboxError("building the base image runs debootstrap, which needs root")
    suite, mirror = debian_suite(), _mirror()
    staging = Path(tempfile.mkdtemp(prefix=".debootstrap-", dir=target.parent.parent))
    shutil.rmtree(staging)
    progress(f"building the base root file system: debootstrap {suite} from {mirror} (~1-3 min)")
    argv = [
        tool,
        "--variant=minbase",
        f"--include={','.join(base_packages())}",
        suite,
        str(staging),
        mirror,
    ]
    try:
        _stream(argv, progress)
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (staging / leftover).glob("*"):
                if item.is_file():
                    item.unlink()
        shutil.copyfile(RECIPES / "gitconfig.txt", staging / "etc" / "gitconfig")
        (staging / "testbed").mkdir(exist_ok=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    progress(f"base root file system ready at {target}")


def _stream(argv: Sequence[str], progress: Progress) -> None:
    """Run debootstrap, showing one line per phase and a count every 25 packages.

    Raises with the tool's last lines on failure.
    """
    tail: list[str] = []
    phase, count = "", 0
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip()
            tail = [*tail[-19:], line]
            if not line.startswith("I: "):
                continue
            word = line[3:].split(" ", 1)[0]
            count = count + 1 if word == phase else 1
            if word != phase:
                progress(line[3:])
            elif count % 25 == 0:
                progress(f"{line[3:]} ({count} packages so far)")
            phase = word
    if proc.returncode != 0:
        raise SandboxError(
            f"{Path(argv[0]).name} failed (exit {proc.returncode}); last lines:\n" + "\n".join(tail)
        )


def _image_exists(client: Any, tag: str) -> bool:
    import docker  # the client exists, so the SDK is importable

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_base_image(*, client: Any = None, progress: Progress | None = stderr_progress) -> str:
    """Return the base image's tag, building it (debootstrap + ``docker import``) if absent."""
    with client_session(client) as session:
        return _ensure_base_image(session, progress)


def _ensure_base_image(client: Any, progress: Progress | None) -> str:
    tag = base_tag()
    if _image_exists(client, tag):
        return tag
    rootfs = ensure_base_rootfs(progress)
    show = progress or (lambda _line: None)
    with _build_lock():
        if _image_exists(client, tag):
            return tag
        show(f"importing {rootfs} as {tag}")
        repository, _, version = tag.partition(":")
        with subprocess.Popen(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE
        ) as tar:
            client.api.import_image(
                src=tar.stdout,
                repository=repository,
                tag=version,
                changes=[*_IMAGE_ENV, f"LABEL {KIND_LABEL}=base", 'CMD ["bash"]'],
                stream_src=True,
            )
        if tar.returncode != 0 or not _image_exists(client, tag):
            raise SandboxError(f"docker import of {rootfs} failed (tar exit {tar.returncode})")
        show(f"built {tag}")
    return tag


def _use_docker(client: Any, backend: str) -> bool:
    """Whether layers are built as Docker images (else as root file systems for bubblewrap).

    ``backend`` is the sandbox backend that will run them: ``docker`` and ``bwrap`` decide
    (an explicit ``bwrap`` builds root file systems even where an engine answers, rather than
    building images only to export them); ``auto`` builds with Docker when a client was given
    or an engine answers.
    """
    from .backends import resolve_backend

    if backend == "auto" and client is not None:
        return True
    return resolve_backend(backend) == "docker"


def image_available(image: str, *, backend: str = "auto") -> bool:
    """Whether ``image`` can run under ``backend`` now, without building anything.

    For Docker: the engine has the tag. For bubblewrap: ``image`` is a directory, or its root
    file system is in the cache (the base's, a layer built without Docker, or an export), or
    an engine answers and has the tag (it is exported on first use).
    """
    from .backends import docker_unavailable_reason, resolve_backend

    chosen = resolve_backend(backend)
    if chosen == "bwrap":
        if os.path.isdir(image):
            return True
        if image == base_tag():
            return (base_rootfs_path() / "usr" / "bin" / "python3").exists()
        marks = (rootfs_path(image) / LAYER_MARK, _export_path(image) / _EXPORT_MARK)
        if any(mark.exists() for mark in marks):
            return True
        if docker_unavailable_reason() is not None:
            return False
    with client_session() as client:
        return _image_exists(client, image)


def ensure_env_image(
    wheels: Sequence[str | os.PathLike[str]] = (),
    requirements: Sequence[str] = (),
    *,
    base_image: str | None = None,
    client: Any = None,
    backend: str = "auto",
    progress: Progress | None = stderr_progress,
) -> str:
    """Return the tag of the base image plus Python packages installed from local wheels.

    ``wheels`` are ``.whl`` files copied into the build; ``requirements`` are pip
    requirement lines resolved against them only (``--no-index``). With no requirements,
    every given wheel is installed. With neither, the base image itself is returned, since an
    empty layer would only cost a build. For the bubblewrap backend (``backend="bwrap"``, or
    ``auto`` without a Docker engine) the layer is built as a root file system, under the same
    tag.
    """
    files = [Path(w) for w in wheels]
    for path in files:
        if not path.is_file() or path.suffix != ".whl":
            raise SandboxDataError(f"{path} is not a wheel file; pass paths of local .whl files")
    base = base_image or ensure_base(client, progress, backend=backend)
    if not files and not requirements:
        return base
    dockerfile = (RECIPES / "Dockerfile.env").read_text()
    script = (RECIPES / "install-wheels.sh").read_text()
    tag = f"{REPOSITORY}/env:" + _digest(
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

    layer = _Layer(tag, "env", base, dockerfile, fill, {"BASE_IMAGE": base}, ["install-wheels.sh"])
    layer.build(client, progress, backend)
    return tag


def ensure_instance_image(
    bundle: str | os.PathLike[str],
    commit: str,
    *,
    env_image: str | None = None,
    setup_commands: Sequence[str] = (),
    client: Any = None,
    backend: str = "auto",
    progress: Progress | None = stderr_progress,
) -> str:
    """Return the tag of an image with a repository at ``/testbed``, checked out at ``commit``.

    ``bundle`` is a ``git bundle`` file holding ``commit``; ``env_image`` defaults to the base
    image; ``setup_commands`` run in ``/testbed`` after the checkout (``bash -eux``, no
    network), e.g. ``pip install --no-index --no-build-isolation -e .``. The tag hashes the
    bundle's bytes, the commit, the commands and the parent image. For the bubblewrap backend
    (``backend="bwrap"``, or ``auto`` without a Docker engine) the layer is built as a root
    file system, under the same tag.
    """
    bundle_path = Path(bundle)
    if not bundle_path.is_file():
        raise SandboxDataError(
            f"git bundle {bundle_path} does not exist; create one with `git bundle`"
        )
    if not commit or any(ch.isspace() for ch in commit):
        raise SandboxDataError(f"base commit {commit!r} is not a commit id")
    parent = env_image or ensure_base(client, progress, backend=backend)
    dockerfile = (RECIPES / "Dockerfile.instance").read_text()
    checkout = (RECIPES / "checkout.sh").read_text()
    setup = "".join(f"{command}\n" for command in setup_commands)
    tag = f"{REPOSITORY}/instance:" + _digest(
        parent, dockerfile, checkout, _file_digest(bundle_path), commit, setup
    )

    def fill(context: Path) -> None:
        prune_bundle(bundle_path, commit, context / "repo.bundle")
        shutil.copyfile(RECIPES / "checkout.sh", context / "checkout.sh")
        (context / "setup.sh").write_text(setup)

    buildargs = {"ENV_IMAGE": parent, "BASE_COMMIT": commit}
    layer = _Layer(tag, "instance", parent, dockerfile, fill, buildargs, ["checkout.sh", commit])
    layer.build(client, progress, backend)
    return tag


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


def ensure_base(
    client: Any = None, progress: Progress | None = stderr_progress, *, backend: str = "auto"
) -> str:
    """The base tag, built as a Docker image or as a root file system (see ``_use_docker``).

    Either way the tag then runs under the available backend.
    """
    if _use_docker(client, backend):
        return ensure_base_image(client=client, progress=progress)
    ensure_base_rootfs(progress)
    return base_tag()


@dataclass(frozen=True)
class _Layer:
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

    def build(self, client: Any, progress: Progress | None, backend: str) -> None:
        show = progress or (lambda _line: None)
        if _use_docker(client, backend):
            with client_session(client) as session:
                self._docker_build(session, show)
        else:
            self._bwrap_build(show)

    def _docker_build(self, client: Any, show: Progress) -> None:
        if _image_exists(client, self.tag):
            return
        with _build_lock(), tempfile.TemporaryDirectory(prefix="aem-build-") as tmp:
            if _image_exists(client, self.tag):
                return
            context = Path(tmp)
            (context / "Dockerfile").write_text(self.dockerfile)
            self.fill(context)
            show(f"building {self.tag}")
            log: list[str] = []
            for event in client.api.build(
                path=str(context),
                tag=self.tag,
                buildargs=self.buildargs,
                labels={KIND_LABEL: self.kind},
                network_mode="none",
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
            ):
                text = str(event.get("stream", "")).strip()
                if text:
                    log = [*log[-39:], text]
                    if text.startswith("Step "):
                        show(text)
                if "error" in event:
                    detail = "\n".join(log[-20:])
                    raise SandboxError(f"building {self.tag} failed: {event['error']}\n{detail}")
            show(f"built {self.tag}")

    def _bwrap_build(self, show: Progress) -> None:
        from .base import Limits
        from .bwrap_sandbox import NOBODY, BwrapSandbox

        target = rootfs_path(self.tag)
        if (target / LAYER_MARK).exists():
            return
        parent = rootfs_for_image(self.parent, progress=show)
        with _build_lock():
            if (target / LAYER_MARK).exists():
                return
            show(f"building {self.tag} as a root file system for bubblewrap")
            limits = Limits(command_timeout=3600.0, output_chars=4000)
            box = BwrapSandbox(self.parent, limits=limits, rootfs=parent)
            try:
                context = box.host_path("tmp") / "aem-build"
                context.mkdir()
                self.fill(context)
                if os.geteuid() == 0:
                    shutil.chown(context, NOBODY, NOBODY)
                    for item in context.rglob("*"):
                        shutil.chown(item, NOBODY, NOBODY)
                name, *args = self.script
                command = shlex.join(["bash", "-eu", f"/tmp/aem-build/{name}", "/tmp/aem-build"])
                code, output = box.exec(" ".join([command, *map(shlex.quote, args)]), workdir="/")
                if code != 0:
                    raise SandboxError(f"building {self.tag} failed (exit {code}):\n{output}")
                (box.host_path("work") / LAYER_MARK).unlink(missing_ok=True)
                box.save_as_rootfs(target)
                (target / LAYER_MARK).write_text(self.tag + "\n")
            finally:
                box.close()
            show(f"built {self.tag} at {target}")


def rootfs_for_image(image: str, *, progress: Progress | None = stderr_progress) -> Path:
    """A root file system directory for the bubblewrap backend to run ``image`` on.

    ``image`` may be a directory (used as is), the base tag (its debootstrap tree, built if
    needed), an env or instance tag built without Docker (see ``ensure_instance_image``), or
    any Docker image, which is exported once into the cache (re-exported when the tag points
    to a new image id).
    """
    if os.path.isdir(image):
        return Path(image)
    if image == base_tag():
        return ensure_base_rootfs(progress)
    if (rootfs_path(image) / LAYER_MARK).exists():
        return rootfs_path(image)
    target = _export_path(image)
    from .backends import docker_unavailable_reason

    if docker_unavailable_reason() is not None:
        if (target / _EXPORT_MARK).exists():
            return target
        raise SandboxError(
            f"no root file system for image {image!r}: without a Docker engine only the base "
            "image, a root file system directory, or an image exported earlier can run "
            "under bubblewrap; export it on a host with Docker or pass a directory"
        )
    import docker

    with client_session() as client:
        try:
            image_id = client.images.get(image).id
        except docker.errors.ImageNotFound:
            raise SandboxError(
                f"the Docker image {image!r} is not present locally; build it "
                "(`aem sandbox build`) or load it with `docker load -i FILE`"
            ) from None
        marker = target / _EXPORT_MARK
        if marker.exists() and marker.read_text() == image_id:
            return target
        with _build_lock():
            if marker.exists() and marker.read_text() == image_id:
                return target
            _export(client, image, image_id, target, progress or (lambda _line: None))
    return target


def _export_path(image: str) -> Path:
    """Where a Docker image's file system is unpacked for the bubblewrap backend."""
    return cache_dir() / "rootfs" / ("export_" + _digest(image))


def _export(client: Any, image: str, image_id: str, target: Path, progress: Progress) -> None:
    """Unpack ``image``'s file system into ``target`` (atomically replaced)."""
    progress(f"exporting {image} to {target} for the bubblewrap backend")
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=cache_dir()))
    labels = current_owner().labels()  # so that the reaper removes it if this process dies
    container = client.containers.create(
        image, command=["true"], network_mode="none", labels=labels
    )
    try:
        with subprocess.Popen(
            ["tar", "-x", "--numeric-owner", "-C", str(staging)], stdin=subprocess.PIPE
        ) as tar:
            assert tar.stdin is not None
            for chunk in container.export():
                tar.stdin.write(chunk)
            tar.stdin.close()
        if tar.returncode != 0:
            raise SandboxError(f"unpacking {image} failed (tar exit {tar.returncode})")
        (staging / _EXPORT_MARK).write_text(image_id)
        staging.chmod(0o755)  # mkdtemp's 0700 would lock out the sandbox's unprivileged user
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(target)
    finally:
        container.remove(force=True)
        shutil.rmtree(staging, ignore_errors=True)
