"""Disk use that follows the data, and a store that describes its own geometry.

- A closed store keeps blocks (``st_blocks``) for what it holds, not for the 1 GiB commit log
  file, the consume queue files and the 420 MB index file RocketMQ's lengths require (the
  lengths stay).
- ``rocketstore rebuild-indexes STORE`` without ``-c`` keeps the store's geometry, so the
  application opens the store afterwards with its own keyword arguments.
- A keyword that contradicts the files is refused (``InvalidConfigError`` naming it and the value
  found) and changes nothing; a directory that is not a store is not turned into one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketstore import InvalidConfigError, MessageStore, UnsupportedFormatError, cli

MIB = 1 << 20

SMALL: dict[str, Any] = {
    "mapped_file_size_commit_log": MIB,
    "mapped_file_size_consume_queue": 20 * 1000,
    "max_hash_slot_num": 100,
    "max_index_num": 400,
}


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Relative path -> (bytes of blocks, length) of every regular file under ``root``."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = Path(d, n)
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_blocks * 512, st.st_size)
    return out


def _fill(store: MessageStore, n: int, first: int = 0) -> int:
    """Puts ``n`` 100-byte messages with a key each; the bytes their records, consume queue units
    and index entries (unique key and key) occupy."""
    data = 0
    for i in range(first, first + n, 1000):
        batch = [
            {"topic": "Space", "body": b"x" * 100, "keys": f"k{j}"}
            for j in range(i, min(first + n, i + 1000))
        ]
        for r in store.put_batch(batch):
            assert r.ok
            data += r.wrote_bytes + 20 + 2 * 20
    return data


@pytest.mark.parametrize("n", [1, 1000])
def test_a_closed_default_store_keeps_the_blocks_of_its_data(tmp_path: Path, n: int) -> None:
    root = tmp_path / "store"
    with MessageStore(root) as store:
        data = _fill(store, n)
    files = _files(root)
    used = sum(b for b, _ in files.values())
    assert used <= data * 1.1 + MIB, (used, data, files)
    if n == 1:
        assert used < 5_000_000, files
    # RocketMQ's lengths.
    assert files["commitlog/00000000000000000000"][1] == 1 << 30
    assert files["consumequeue/Space/0/00000000000000000000"][1] == 6_000_000
    assert [s for k, (_, s) in files.items() if k.startswith("index/")] == [420_000_040]

    # Reopened for writing, appended to, closed: trimmed again, lengths unchanged, all there.
    with MessageStore(root) as store:
        data += _fill(store, 1000, n)
    again = _files(root)
    assert {k: s for k, (_, s) in again.items()} == {k: s for k, (_, s) in files.items()}
    assert sum(b for b, _ in again.values()) <= data * 1.1 + MIB
    with MessageStore(root, read_only=True) as store:
        assert store.max_offset_in_queue("Space", 0) == n + 1000
        assert len(store.query_message("Space", f"k{n + 999}")) == 1
        assert len(store.query_message("Space", "k0")) == 1


def test_rebuild_indexes_without_keywords_keeps_the_stores_geometry(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore(root, **SMALL) as store:
        _fill(store, 600)
    assert cli.main(["rebuild-indexes", str(root)]) == 0
    sizes = {s for k, (_, s) in _files(root).items() if k.startswith("consumequeue/")}
    assert sizes == {20 * 1000}
    # The application's next open, with its own keywords or none, works.
    with MessageStore(root, **SMALL) as store:
        assert store.max_offset_in_queue("Space", 0) == 600
    with MessageStore(root) as store:
        _fill(store, 10, 600)
    with MessageStore(root, read_only=True) as store:
        assert store.max_offset_in_queue("Space", 0) == 610


@pytest.mark.parametrize(
    ("key", "value", "found"),
    [
        ("mapped_file_size_commit_log", 2 * MIB, str(MIB)),
        ("mapped_file_size_consume_queue", 20 * 2000, "20000"),
        ("max_hash_slot_num", 1000, "max_hash_slot_num"),
    ],
)
def test_a_keyword_contradicting_the_files_is_refused_and_changes_nothing(
    tmp_path: Path, tree_digest: Callable[[Path], object], key: str, value: int, found: str
) -> None:
    root = tmp_path / "store"
    with MessageStore(root, **SMALL) as store:
        _fill(store, 10)
    before = tree_digest(root)
    with pytest.raises(InvalidConfigError, match=key) as err:
        MessageStore(root, **{**SMALL, key: value})
    assert found in str(err.value)
    assert tree_digest(root) == before
    assert not (root / "abort").exists()


def test_a_directory_that_is_not_a_store_is_refused(
    tmp_path: Path, tree_digest: Callable[[Path], object]
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    before = tree_digest(tmp_path)
    with pytest.raises(UnsupportedFormatError, match="not a store"):
        MessageStore(tmp_path)
    assert tree_digest(tmp_path) == before
