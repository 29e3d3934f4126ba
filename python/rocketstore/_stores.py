"""Store discovery without Spark: store roots under a directory, their commit log files and
the ``_SUCCESS`` manifest a Spark write leaves in the root.

Used by the ``rocketstore`` command and by the Spark source, writer and jobs alike.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "ABORT_FILE",
    "MANIFEST",
    "TEMPORARY",
    "commitlog_files",
    "find_stores",
    "is_store",
    "read_manifest",
    "store_key",
    "writer_holds",
]

#: Name of the manifest a successful Spark write leaves in the root.
MANIFEST = "_SUCCESS"
#: File in a store root while a writer has the store open (RocketMQ's ``abort``): present
#: after a crash, absent after a clean close.
ABORT_FILE = "abort"
#: Directory under the root holding the per-attempt stores of running Spark writes.
TEMPORARY = "_temporary"


def writer_holds(root: str | os.PathLike[str]) -> bool:
    """True if a writer (a ``MessageStore`` opened for writing, in this process or another)
    holds the store at ``root``: its ``lock`` file is locked.

    Probes both kinds of lock an engine may hold (``flock``: taken for an instant if free;
    POSIX record locks: only queried, ``F_OFD_GETLK``) and changes no byte. False if there
    is no lock file (the store was never opened for writing) or it cannot be opened.
    """
    import fcntl
    import struct

    path = Path(root) / "lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        getlk = getattr(fcntl, "F_OFD_GETLK", None)
        if getlk is None:
            return False
        # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD queries).
        query = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        try:
            answer = fcntl.fcntl(fd, getlk, query)
        except OSError:
            return False
        return bool(struct.unpack("hhqqi4x", answer)[0] != fcntl.F_UNLCK)
    finally:
        os.close(fd)


def is_store(path: Path) -> bool:
    """True if ``path`` is a store root: a directory with a ``commitlog/`` directory."""
    return (path / "commitlog").is_dir()


def find_stores(root: str | os.PathLike[str]) -> list[Path]:
    """Every store root at or below ``root``, sorted by path.

    ``root`` itself if it is a store; otherwise the walk descends into every directory whose
    name does not start with ``_`` or ``.`` (so ``_temporary``, where writers keep
    unpublished stores, is skipped) and stops at each store root it meets. Symbolic links
    to directories are followed.
    """
    root = Path(root)
    if is_store(root):
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(root, followlinks=True):
        here = Path(dirpath)
        keep = []
        for name in sorted(dirnames):
            if name.startswith(("_", ".")):
                continue
            child = here / name
            if is_store(child):
                found.append(child)
            else:
                keep.append(name)
        dirnames[:] = keep
    return sorted(found)


def store_key(root: Path, store: Path) -> str:
    """The name of ``store`` in offsets and options: its path relative to the load path."""
    if store == root:
        return "."
    return store.relative_to(root).as_posix()


def commitlog_files(store: Path) -> list[tuple[int, int]]:
    """``(start offset, size)`` of each commit log file of ``store``, by start offset.

    File names are the 20-digit start offsets RocketMQ gives them; other names are ignored.
    """
    files: list[tuple[int, int]] = []
    with os.scandir(store / "commitlog") as it:
        for entry in it:
            if len(entry.name) == 20 and entry.name.isdigit() and entry.is_file():
                files.append((int(entry.name), entry.stat().st_size))
    return sorted(files)


def read_manifest(root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``_SUCCESS`` manifest the Spark writer left in ``root``, or None if there is none."""
    path = Path(root) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a rocketstore manifest (not a JSON object)")
    return data
