"""Offline sandbox images for either backend: base, environment (local wheels), instance.

The public builders. Each asks the backend chooser (:func:`sandboxes.backends.build_backend`)
whether a layer becomes a Docker image (:mod:`sandboxes.docker_images`) or a root file
system for bubblewrap (:mod:`sandboxes.rootfs`); what goes into a layer, and so its tag, is
the same either way (:mod:`sandboxes.layers`). Nothing is pulled from a registry.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from . import docker_images, rootfs
from .backends import build_backend, resolve_backend
from .docker_engine import docker_unavailable_reason
from .docker_images import ensure_base_image
from .layers import (
    Layer,
    Progress,
    base_tag,
    bundle_file,
    env_layer,
    instance_layer,
    stderr_progress,
    wheel_files,
)
from .rootfs import ensure_base_rootfs


def ensure_base(
    client: Any = None, progress: Progress | None = stderr_progress, *, backend: str = "auto"
) -> str:
    """The base tag, built as a Docker image or as a root file system (see ``build_backend``).

    Either way the tag then runs under the available backend.
    """
    if build_backend(backend, client) == "docker":
        return ensure_base_image(client=client, progress=progress)
    ensure_base_rootfs(progress)
    return base_tag()


def image_available(image: str, *, backend: str = "auto") -> bool:
    """Whether ``image`` can run under ``backend`` now, without building anything.

    For Docker: the engine has the tag. For bubblewrap: ``image`` is a directory, or its root
    file system is in the cache (the base's, a layer built without Docker, or an export), or
    an engine answers and has the tag (it is exported on first use).
    """
    if resolve_backend(backend) == "bwrap":
        if rootfs.rootfs_cached(image):
            return True
        if docker_unavailable_reason() is not None:
            return False
    return docker_images.image_present(image)


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
    files = wheel_files(wheels)
    base = base_image or ensure_base(client, progress, backend=backend)
    if not files and not requirements:
        return base
    return _build(env_layer(base, files, requirements), client, progress, backend)


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
    bundle_path = bundle_file(bundle, commit)
    parent = env_image or ensure_base(client, progress, backend=backend)
    layer = instance_layer(parent, bundle_path, commit, setup_commands)
    return _build(layer, client, progress, backend)


def _build(layer: Layer, client: Any, progress: Progress | None, backend: str) -> str:
    if build_backend(backend, client) == "docker":
        docker_images.build_layer(layer, client=client, progress=progress)
    else:
        rootfs.build_layer(layer, progress)
    return layer.tag
