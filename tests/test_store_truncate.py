"""``MessageStore(path, truncate_to=offset)``: the commit log's tail cut back to a record boundary.

What the streaming sink uses to remove a partly appended micro-batch: every record from the cut
on leaves the commit log, the consume queues and the index, appends go on from the cut, the next
plain open finds the cut (the checkpoint does not remember the old end), and a bad offset is a
typed error that changes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketstore import MessageStore
from rocketstore.exceptions import InvalidMessageError, OffsetOutOfRangeError

SMALL = {"mapped_file_size_commit_log": 64 * 1024}


def test_cut_removes_records_queue_units_and_keys(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as s:
        for i in range(5):
            s.put("A", f"a{i}".encode(), keys=[f"k{i}"])
        mark = s.max_commitlog_offset()
        for i in range(300):  # several 64 KiB files past the mark
            s.put("A" if i % 2 else "B", b"x" * 500, keys=["late"])
    with MessageStore(root, truncate_to=mark, **SMALL) as s:
        assert s.max_commitlog_offset() == mark
        assert s.max_offset_in_queue("A", 0) == 5
        assert s.max_offset_in_queue("B", 0) == 0
        assert len(s.commitlog_files()) == 1
        assert s.query_message("A", "late") == []
        assert len(s.query_message("A", "k3")) == 1
        r = s.put("A", b"after")
        assert (r.commitlog_offset, r.queue_offset) == (mark, 5)
    with MessageStore(root, **SMALL) as s:
        assert s.max_offset_in_queue("A", 0) == 6
        assert s.look_message_by_offset(mark).body == b"after"


def test_bad_offsets_are_refused_and_change_nothing(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore(root) as s:
        first = s.put("A", b"one")
        end = s.max_commitlog_offset()
        s.put("A", b"two")
        full = s.max_commitlog_offset()
    with pytest.raises(InvalidMessageError, match="not the start of a record"):
        MessageStore(root, truncate_to=first.commitlog_offset + 1)
    with pytest.raises(OffsetOutOfRangeError):
        MessageStore(root, truncate_to=full + 1)
    with pytest.raises(OffsetOutOfRangeError):
        MessageStore(root, truncate_to=-1)
    with pytest.raises(InvalidMessageError, match="read-only"):
        MessageStore(root, read_only=True, truncate_to=end)
    assert not (root / "abort").exists()
    with MessageStore(root, read_only=True) as s:
        assert s.max_commitlog_offset() == full
        assert s.max_offset_in_queue("A", 0) == 2


def test_a_crashed_store_is_recovered_then_cut(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore(root) as s:
        s.put("A", b"kept")
        mark = s.max_commitlog_offset()
        s.put("A", b"cut")
    (root / "abort").write_bytes(b"")  # as if the writer had been killed
    with MessageStore(root, truncate_to=mark) as s:
        assert s.max_commitlog_offset() == mark
        assert s.max_offset_in_queue("A", 0) == 1
    assert not (root / "abort").exists()
