"""Isolated execution for agents: Docker containers, or bubblewrap where no engine runs.

Typical use::

    from sandboxes import open_sandbox, ensure_instance_image

    image = ensure_instance_image("repo.bundle", "3f2a1c0")
    with open_sandbox(image) as box:
        code, output = box.exec("python -m pytest -q", timeout=120)
        patch = box.diff()

Importing this package is cheap: the docker SDK is imported only by the Docker backend.
"""

from __future__ import annotations

from .backends import open_sandbox, resolve_backend
from .base import ExecResult, Limits, Sandbox
from .docker_images import ensure_base_image
from .errors import (
    InfraError,
    SandboxDataError,
    SandboxDependencyError,
    SandboxError,
    SandboxFileError,
)
from .images import ensure_base, ensure_env_image, ensure_instance_image, image_available
from .layers import base_tag
from .reaper import gc
from .rootfs import ensure_base_rootfs, rootfs_for_image

__all__ = [
    "ExecResult",
    "InfraError",
    "Limits",
    "Sandbox",
    "SandboxDataError",
    "SandboxDependencyError",
    "SandboxError",
    "SandboxFileError",
    "base_tag",
    "ensure_base",
    "ensure_base_image",
    "ensure_base_rootfs",
    "ensure_env_image",
    "ensure_instance_image",
    "gc",
    "image_available",
    "open_sandbox",
    "resolve_backend",
    "rootfs_for_image",
]
