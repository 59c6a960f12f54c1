"""Crash-safe writes: a reader sees the old file (or directory) or the whole new one, never a
part."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write to a temporary file beside `path`, flush it to disk, then rename it into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{path.name}-")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # the permissions a plain open() would have given
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def atomic_directory(path: Path, build: Callable[[Path], None]) -> None:
    """Build a directory beside `path` (build(tmp) fills it), flush its files to disk, then
    rename it into place. A directory already at `path` is first renamed aside and removed
    once the new one is in place: a directory cannot be renamed over one that holds files.
    A crash between the two renames leaves the old one whole, beside `path` as .old-NAME-*."""
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".tmp-{path.name}-"))
    old = None
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700 would hide the model from others
        build(tmp)
        for directory, _, files in os.walk(tmp):
            for name in files:
                _fsync_file(Path(directory) / name)
            _fsync_directory(Path(directory))
        if path.exists():
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".old-{path.name}-"))
            os.replace(path, old)  # onto an empty directory: allowed
        os.replace(tmp, path)
    except BaseException:
        if old is not None and not path.exists():
            os.replace(old, path)  # put the old one back
        elif old is not None:
            old.rmdir()  # the old one never moved
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_directory(path.parent)
    if old is not None:
        shutil.rmtree(old)


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(path: Path) -> None:
    """Make the renames in it durable: without this a power cut can lose a new name."""
    _fsync_file(path)
