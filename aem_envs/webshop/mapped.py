"""Folders of memory-mapped arrays: built once under a lock, renamed into place, checked on open.

The WebShop store (:mod:`~aem_envs.webshop.store`) and search index
(:mod:`~aem_envs.webshop.search`) are such folders. Each file is one raw array whose dtype,
shape and size the folder's ``manifest.json`` records; opening maps every file read-only, so
all processes that open a folder share its pages through the page cache instead of each
holding a copy.

Why the checks: a folder is written into a staging folder and renamed into place, so a killed
build never leaves half of one, but a disk can still be filled, a file truncated or edited by
hand. Opening compares every file's size with the manifest and the checksums of the small
files (offsets, keys), which catches a truncated or overwritten store without reading the
large ones; :func:`open_or_build` rebuilds a damaged folder and says so in one line.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import numpy as np

from aem_envs.core.io import build_lock

MANIFEST = "manifest.json"
#: Files up to this size are checksummed when opened; larger ones are checked by size.
CHECKSUM_LIMIT = 64 << 20


class DamagedFolder(Exception):
    """A folder that exists but is not sound; the message says what is wrong."""


class MappedFolder:
    """An opened folder: its arrays (read-only memory maps) and the builder's metadata."""

    def __init__(self, path: Path, meta: Mapping[str, Any], arrays: dict[str, np.ndarray]):
        self.path = path
        self.meta = meta
        self.arrays = arrays


def _file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def open_folder(path: Path, kind: str) -> MappedFolder | None:
    """The folder at ``path``, or ``None`` when there is none; :class:`DamagedFolder` when
    it is there but its manifest or files do not agree."""
    manifest_path = path / MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        files = manifest["files"]
        meta = manifest["meta"]
        found_kind = manifest["kind"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DamagedFolder(f"unreadable {MANIFEST} ({exc})") from None
    if found_kind != kind:
        raise DamagedFolder(f"holds {found_kind!r}, expected {kind!r}")
    arrays: dict[str, np.ndarray] = {}
    for name, spec in files.items():
        file = path / name
        try:
            size = file.stat().st_size
        except OSError:
            raise DamagedFolder(f"{name} is missing") from None
        if size != spec["bytes"]:
            raise DamagedFolder(f"{name} has {size} bytes, the manifest says {spec['bytes']}")
        if "sha256" in spec and _file_sha256(file) != spec["sha256"]:
            raise DamagedFolder(f"{name} does not match its checksum")
        dtype, shape = np.dtype(spec["dtype"]), tuple(spec["shape"])
        if size == 0:  # an empty file cannot be mapped
            arrays[name] = np.empty(shape, dtype=dtype)
        else:
            # A plain view: slicing a memmap subclass costs several times more.
            arrays[name] = np.memmap(file, dtype=dtype, mode="r", shape=shape).view(np.ndarray)
    return MappedFolder(path, meta, arrays)


class FolderWriter:
    """Writes a folder's files into a staging folder; :meth:`commit` renames it into place.

    Leaving the ``with`` block without committing removes the staging folder.
    """

    def __init__(self, path: Path, kind: str) -> None:
        self.path = path
        self.kind = kind
        path.parent.mkdir(parents=True, exist_ok=True)
        self._staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.staging-", dir=path.parent))
        self._files: dict[str, dict[str, Any]] = {}
        self._streams: dict[str, tuple[BinaryIO, np.dtype]] = {}

    def __enter__(self) -> FolderWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for handle, _ in self._streams.values():
            handle.close()
        shutil.rmtree(self._staging, ignore_errors=True)

    def array(self, name: str, array: np.ndarray) -> None:
        """Write a whole array as the file ``name``."""
        self.append(name, array)
        self._close(name, tuple(array.shape))

    def append(self, name: str, chunk: np.ndarray | bytes) -> None:
        """Append ``chunk`` to the one-dimensional file ``name`` (bytes append to a uint8 file)."""
        array = np.frombuffer(chunk, dtype=np.uint8) if isinstance(chunk, bytes) else chunk
        if name not in self._streams:
            self._streams[name] = ((self._staging / name).open("wb"), array.dtype)
        handle, dtype = self._streams[name]
        if array.dtype != dtype:
            raise TypeError(f"{name}: appending {array.dtype} to a {dtype} file")
        handle.write(np.ascontiguousarray(array).data)

    def _close(self, name: str, shape: tuple[int, ...] | None = None) -> None:
        handle, dtype = self._streams.pop(name)
        handle.flush()
        os.fsync(handle.fileno())
        size = handle.tell()
        handle.close()
        spec: dict[str, Any] = {
            "dtype": dtype.str,
            "shape": list(shape) if shape is not None else [size // dtype.itemsize],
            "bytes": size,
        }
        if size <= CHECKSUM_LIMIT:
            spec["sha256"] = _file_sha256(self._staging / name)
        self._files[name] = spec

    def commit(self, meta: Mapping[str, Any]) -> None:
        """Write the manifest and rename the folder into place, replacing a damaged one."""
        for name in list(self._streams):
            self._close(name)
        manifest = {"kind": self.kind, "meta": dict(meta), "files": self._files}
        (self._staging / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        os.chmod(self._staging, 0o755)
        trash = None
        if self.path.exists():
            trash = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.old-", dir=self.path.parent))
            os.replace(self.path, trash / "folder")
        os.replace(self._staging, self.path)
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)


def open_or_build(
    path: Path, kind: str, build: Callable[[FolderWriter], Mapping[str, Any]], what: str
) -> MappedFolder:
    """The folder at ``path``, built by ``build`` (which writes the files and returns the
    metadata) when it is missing or damaged; ``what`` names it in the warning."""
    with contextlib.suppress(DamagedFolder):
        folder = open_folder(path, kind)
        if folder is not None:
            return folder
    with build_lock(path):
        try:  # another process may have built it while this one waited
            folder = open_folder(path, kind)
        except DamagedFolder as exc:
            warnings.warn(f"{what} at {path} is damaged ({exc}); rebuilding it", stacklevel=3)
            folder = None
        if folder is not None:
            return folder
        # Under the lock no other process builds this folder: staging folders left here
        # were a killed build's.
        for stale in path.parent.glob(f".{path.name}.staging-*"):
            shutil.rmtree(stale, ignore_errors=True)
        with FolderWriter(path, kind) as out:
            out.commit(build(out))
    opened = open_folder(path, kind)
    assert opened is not None  # just written
    return opened
