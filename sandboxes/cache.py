"""Where aem keeps what it builds: the cache root, the sandboxes' folder in it, the build lock.

Stdlib only and at the bottom of the package, so that every builder, the backends and the
reaper agree on one layout without importing each other. The cache root is aem's, shared
by the model and data caches: one ``$AEM_CACHE_DIR`` moves them all.

Layout under :func:`cache_dir`: ``rootfs/`` (root file systems: the base, layers built
without Docker, exports of Docker images), ``scratch/`` (the bubblewrap sandboxes' writable
copies) and ``build.lock``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

#: File at the top of a layer root file system built without Docker; holds the tag.
LAYER_MARK = ".aem-layer"
#: File at the top of an exported root file system: the id of the Docker image it came from.
EXPORT_MARK = ".aem-image-id"


def aem_cache_root() -> Path:
    """Root of aem's caches: ``$AEM_CACHE_DIR``, else ``$XDG_CACHE_HOME/aem``, else
    ``~/.cache/aem``."""
    explicit = os.environ.get("AEM_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "aem"


def cache_dir() -> Path:
    """The sandboxes' cache: ``$AEM_SANDBOX_CACHE``, else ``sandboxes/`` under the cache root."""
    override = os.environ.get("AEM_SANDBOX_CACHE")
    if override:
        return Path(override).expanduser()
    return aem_cache_root() / "sandboxes"


def rootfs_dir() -> Path:
    """The folder of every cached root file system."""
    return cache_dir() / "rootfs"


def scratch_dir() -> Path:
    """The folder of the bubblewrap sandboxes' private writable copies."""
    return cache_dir() / "scratch"


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """Hold the cache's build lock, so that concurrent processes wait for one build of a
    layer instead of racing to build it twice."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with (root / "build.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
