"""``rocketstore.truncate_store(path, offset)``: a closed store's tail cut back to a record start.

What the streaming sink uses to remove a partly appended micro-batch: every record from the cut
on leaves the commit log, the consume queues and the index, appends go on from the cut, the next
open finds the cut (the checkpoint does not remember the old end), and a bad offset is a typed
error that changes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketstore import MessageStore, truncate_store
from rocketstore.exceptions import (
    InvalidConfigError,
    InvalidMessageError,
    OffsetOutOfRangeError,
    StoreLockedError,
)

SMALL = 64 * 1024  # mapped_file_size_commit_log


def test_cut_removes_records_queue_units_and_keys(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore(root, mapped_file_size_commit_log=SMALL) as s:
        for i in range(5):
            s.put("A", f"a{i}".encode(), keys=[f"k{i}"])
        mark = s.max_commitlog_offset()
        for i in range(300):  # several 64 KiB files past the mark
            s.put("A" if i % 2 else "B", b"x" * 500, keys=["late"])
        assert len(s.commitlog_files()) > 2
    report = truncate_store(root, mark, mapped_file_size_commit_log=SMALL)
    assert report["end_offset"] == mark
    assert report["commitlog_files_removed"] >= 2
    with MessageStore(root, mapped_file_size_commit_log=SMALL) as s:
        assert s.max_commitlog_offset() == mark
        assert s.max_offset_in_queue("A", 0) == 5
        assert s.max_offset_in_queue("B", 0) == 0
        assert len(s.commitlog_files()) == 1
        assert s.query_message("A", "late") == []
        assert len(s.query_message("A", "k3")) == 1
        r = s.put("A", b"after")
        assert (r.commitlog_offset, r.queue_offset) == (mark, 5)
    with MessageStore(root, read_only=True) as s:
        assert s.max_offset_in_queue("A", 0) == 6
        assert s.look_message_by_offset(mark).body == b"after"


def test_bad_offsets_are_refused_and_change_nothing(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore(root) as s:
        first = s.put("A", b"one")
        s.put("A", b"two")
        full = s.max_commitlog_offset()
    with pytest.raises(InvalidMessageError, match="not the start of a record"):
        truncate_store(root, first.commitlog_offset + 1)
    with pytest.raises(OffsetOutOfRangeError):
        truncate_store(root, full + 1)
    with pytest.raises(OffsetOutOfRangeError):
        truncate_store(root, -1)
    with pytest.raises(InvalidConfigError):
        truncate_store(root, 0, no_such_option=1)
    with MessageStore(root), pytest.raises(StoreLockedError):
        truncate_store(root, 0)
    assert not (root / "abort").exists()
    with MessageStore(root, read_only=True) as s:
        assert s.max_commitlog_offset() == full
        assert s.max_offset_in_queue("A", 0) == 2
    assert truncate_store(root, full)["end_offset"] == full  # the end: nothing to cut


def test_a_crashed_store_is_recovered_then_cut(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore(root) as s:
        s.put("A", b"kept")
        mark = s.max_commitlog_offset()
        s.put("A", b"cut")
    (root / "abort").write_bytes(b"")  # as if the writer had been killed
    truncate_store(root, mark)
    assert not (root / "abort").exists()
    with MessageStore(root) as s:
        assert s.max_commitlog_offset() == mark
        assert s.max_offset_in_queue("A", 0) == 1
