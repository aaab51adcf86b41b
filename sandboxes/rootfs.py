"""Root file systems on disk: what the bubblewrap backend runs on, and the base image's source.

- The base: ``debootstrap --variant=minbase`` of the host's release (see
  :mod:`sandboxes.layers`). It stays cached because bubblewrap runs on it directly, and
  :mod:`sandboxes.docker_images` imports it into Docker from here.
- Layers built without Docker: the layer's script runs in a :class:`BwrapSandbox` over the
  parent's root file system, and the result is saved beside it, hard-linked where unchanged.
- Exports of Docker images, unpacked once so that any image can run under bubblewrap where
  an engine answers (re-exported when the tag points to a new image id).

Builds hold the cache's build lock (:func:`sandboxes.cache.build_lock`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .base import Limits
from .bwrap_sandbox import NOBODY, BwrapSandbox
from .cache import EXPORT_MARK, LAYER_MARK, build_lock, cache_dir, rootfs_dir
from .docker_engine import client_session, docker_module, docker_unavailable_reason
from .errors import SandboxError
from .layers import (
    RECIPES,
    Layer,
    Progress,
    base_packages,
    base_tag,
    debian_mirror,
    debian_suite,
    digest,
    reporter,
    stderr_progress,
)
from .owner import current_owner


def rootfs_path(tag: str) -> Path:
    """Where the root file system of ``tag`` is cached for the bubblewrap backend."""
    return rootfs_dir() / tag.replace("/", "_").replace(":", "_")


def base_rootfs_path() -> Path:
    """Directory of the debootstrap root file system of the current base tag."""
    return rootfs_path(base_tag())


def _export_path(image: str) -> Path:
    """Where a Docker image's file system is unpacked for the bubblewrap backend."""
    return rootfs_dir() / ("export_" + digest(image))


def _is_built(root: Path) -> bool:
    return (root / "usr" / "bin" / "python3").exists()


def ensure_base_rootfs(progress: Progress | None = stderr_progress) -> Path:
    """Build (once) and return the cached debootstrap root filesystem of the base image.

    Needs root and the ``debootstrap`` package; downloads Debian packages from the mirror
    (``$AEM_DEBIAN_MIRROR``, default deb.debian.org) — the only network access of any build.
    """
    target = base_rootfs_path()
    if _is_built(target):
        return target
    with build_lock():
        if _is_built(target):
            return target
        _debootstrap(target, reporter(progress))
    return target


def _debootstrap(target: Path, progress: Progress) -> None:
    tool = shutil.which("debootstrap") or next(
        (p for p in ("/usr/sbin/debootstrap",) if os.path.exists(p)), None
    )
    if tool is None:
        raise SandboxError("debootstrap is not installed; install it: apt-get install debootstrap")
    if os.geteuid() != 0:
        raise SandboxError("building the base image runs debootstrap, which needs root")
    suite, mirror = debian_suite(), debian_mirror()
    staging = Path(tempfile.mkdtemp(prefix=".debootstrap-", dir=cache_dir()))
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


def build_layer(layer: Layer, progress: Progress | None = stderr_progress) -> None:
    """Build ``layer`` as a root file system (once): its script runs in a sandbox over the
    parent's, whose changes are saved under the layer's tag."""
    show = reporter(progress)
    target = rootfs_path(layer.tag)
    if (target / LAYER_MARK).exists():
        return
    parent = rootfs_for_image(layer.parent, progress=show)
    with build_lock():
        if (target / LAYER_MARK).exists():
            return
        show(f"building {layer.tag} as a root file system for bubblewrap")
        limits = Limits(command_timeout=3600.0, output_chars=4000)
        box = BwrapSandbox(layer.parent, rootfs=parent, limits=limits)
        try:
            context = box.host_path("tmp") / "aem-build"
            context.mkdir()
            layer.fill(context)
            if os.geteuid() == 0:
                shutil.chown(context, NOBODY, NOBODY)
                for item in context.rglob("*"):
                    shutil.chown(item, NOBODY, NOBODY)
            name, *args = layer.script
            command = shlex.join(["bash", "-eu", f"/tmp/aem-build/{name}", "/tmp/aem-build"])
            code, output = box.exec(" ".join([command, *map(shlex.quote, args)]), workdir="/")
            if code != 0:
                raise SandboxError(f"building {layer.tag} failed (exit {code}):\n{output}")
            (box.host_path("work") / LAYER_MARK).unlink(missing_ok=True)
            box.save_as_rootfs(target)
            (target / LAYER_MARK).write_text(layer.tag + "\n")
        finally:
            box.close()
        show(f"built {layer.tag} at {target}")


def rootfs_cached(image: str) -> bool:
    """Whether ``image`` has a root file system now, without building or exporting anything:
    it is a directory, the built base, a layer built without Docker, or an export."""
    if os.path.isdir(image):
        return True
    if image == base_tag():
        return _is_built(base_rootfs_path())
    marks = (rootfs_path(image) / LAYER_MARK, _export_path(image) / EXPORT_MARK)
    return any(mark.exists() for mark in marks)


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
    if docker_unavailable_reason() is not None:
        if (target / EXPORT_MARK).exists():
            return target
        raise SandboxError(
            f"no root file system for image {image!r}: without a Docker engine only the base "
            "image, a root file system directory, or an image exported earlier can run "
            "under bubblewrap; export it on a host with Docker or pass a directory"
        )
    with client_session() as client:
        try:
            image_id = client.images.get(image).id
        except docker_module().errors.ImageNotFound:
            raise SandboxError(
                f"the Docker image {image!r} is not present locally; build it "
                "(`aem sandbox build`) or load it with `docker load -i FILE`"
            ) from None
        marker = target / EXPORT_MARK
        if marker.exists() and marker.read_text() == image_id:
            return target
        with build_lock():
            if marker.exists() and marker.read_text() == image_id:
                return target
            _export(client, image, image_id, target, reporter(progress))
    return target


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
        (staging / EXPORT_MARK).write_text(image_id)
        staging.chmod(0o755)  # mkdtemp's 0700 would lock out the sandbox's unprivileged user
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(target)
    finally:
        container.remove(force=True)
        shutil.rmtree(staging, ignore_errors=True)
