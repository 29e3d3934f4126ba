"""Finding store roots under a directory, and the stores' commit log files."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["MANIFEST", "TEMPORARY", "commitlog_files", "find_stores", "is_store", "store_key"]

#: Name of the manifest a successful Spark write leaves in the root.
MANIFEST = "_SUCCESS"
#: Directory under the root holding the per-attempt stores of running Spark writes.
TEMPORARY = "_temporary"


def is_store(path: Path) -> bool:
    """True if ``path`` is a store root: a directory with a ``commitlog/`` directory."""
    return (path / "commitlog").is_dir()


def find_stores(root: Path) -> list[Path]:
    """Every store root at or below ``root``, sorted by path.

    ``root`` itself if it is a store; otherwise the walk descends into every directory whose
    name does not start with ``_`` or ``.`` (so ``_temporary``, where writers keep
    unpublished stores, is skipped) and stops at each store root it meets. Symbolic links
    to directories are followed.
    """
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
