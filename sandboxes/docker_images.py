"""Layers as Docker images: the base imported from its root file system, the rest built.

The base image is the debootstrap root file system of :mod:`sandboxes.rootfs`, streamed
into ``docker import``. Env and instance layers build from their Dockerfiles with the legacy
builder's syntax (no heredocs, no buildx) and ``network_mode="none"``: only debootstrap
talks to the Debian mirror. Builds hold the cache's build lock, so concurrent processes
wait for one build instead of racing.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

from .cache import build_lock
from .docker_engine import client_session, image_exists
from .errors import SandboxError
from .layers import KIND_LABEL, Layer, Progress, base_tag, reporter, stderr_progress
from .rootfs import ensure_base_rootfs

_IMAGE_ENV = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
)


def ensure_base_image(*, client: Any = None, progress: Progress | None = stderr_progress) -> str:
    """Return the base image's tag, building it (debootstrap + ``docker import``) if absent."""
    with client_session(client) as session:
        return _ensure_base_image(session, progress)


def _ensure_base_image(client: Any, progress: Progress | None) -> str:
    tag = base_tag()
    if image_exists(client, tag):
        return tag
    rootfs = ensure_base_rootfs(progress)
    show = reporter(progress)
    with build_lock():
        if image_exists(client, tag):
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
        if tar.returncode != 0 or not image_exists(client, tag):
            raise SandboxError(f"docker import of {rootfs} failed (tar exit {tar.returncode})")
        show(f"built {tag}")
    return tag


def image_present(image: str, *, client: Any = None) -> bool:
    """Whether the engine has ``image`` now (nothing is built or pulled)."""
    with client_session(client) as session:
        return image_exists(session, image)


def build_layer(
    layer: Layer, *, client: Any = None, progress: Progress | None = stderr_progress
) -> None:
    """Build ``layer`` as a Docker image (once), from its Dockerfile and build context."""
    with client_session(client) as session:
        _build(session, layer, reporter(progress))


def _build(client: Any, layer: Layer, show: Progress) -> None:
    if image_exists(client, layer.tag):
        return
    with build_lock(), tempfile.TemporaryDirectory(prefix="aem-build-") as tmp:
        if image_exists(client, layer.tag):
            return
        context = Path(tmp)
        (context / "Dockerfile").write_text(layer.dockerfile)
        layer.fill(context)
        show(f"building {layer.tag}")
        log: list[str] = []
        for event in client.api.build(
            path=str(context),
            tag=layer.tag,
            buildargs=layer.buildargs,
            labels={KIND_LABEL: layer.kind},
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
                raise SandboxError(f"building {layer.tag} failed: {event['error']}\n{detail}")
        show(f"built {layer.tag}")
