"""Expired-file cleanup keeps the stream sink's stores bounded over days, and the sink's
exactly-once bookkeeping survives it.

No test sleeps for days: the stores' retention (``fileReservedTime``) and the cleanup service's
clock (``MessageStore._set_clock_ms``) are driven instead, with small files so that a few
hundred rows fill many of them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from tests._sink_driver import SinkDriver, rows

import rocketstore
from rocketstore.spark._reader import MESSAGE_SCHEMA, RocketStoreReader, list_queues
from rocketstore.spark._sink_log import COMMIT_FILE, _logged_commit, last_commit
from rocketstore.spark._stream_writer import store_name

SMALL = {
    "mappedFileSizeCommitLog": str(64 * 1024),
    "mappedFileSizeConsumeQueue": str(100 * 20),
    "maxHashSlotNum": "50",
    "maxIndexNum": "200",
}
PAD = "x" * 400  # bodies of ~400 bytes: 64 KiB holds ~120 rows


def _count(store: Path, sub: str) -> int:
    return sum(1 for p in (store / sub).rglob("*") if p.is_file())


def _bodies(tag: str, n: int) -> list[str]:
    return [f"{PAD}{b}" for b in rows(tag, n)]


def test_a_long_running_sinks_stores_stay_bounded_and_keep_their_bookkeeping(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = tmp_path / "sink"
    # fileReservedTime=0: every commit log file but the last is expired at once, as after days.
    d = SinkDriver(monkeypatch, str(root), stores="2", fileReservedTime="0", **SMALL)
    per_store = [0, 0]
    batches = 30
    for b in range(batches):
        parts = [_bodies(f"b{b}p{p}", 60) for p in range(2)]
        d.batch(b, parts)
        for p in range(2):
            per_store[(p + b) % 2] += 60
        for i in range(2):
            store = root / store_name(i)
            # Each store took 30 x 60 rows of ~450 bytes (~13 files of 64 KiB); cleanup at
            # every commit keeps the last file or two, and the queues and index over them.
            assert _count(store, "commitlog") <= 3, (b, i)
            assert _count(store, "index") <= 4, (b, i)
            assert _count(store, "consumequeue") <= 10, (b, i)
    for i in range(2):
        with rocketstore.MessageStore(root / store_name(i), read_only=True) as s:
            assert s.min_commitlog_offset() > 0, "expired files were deleted"
            c = last_commit(s)
            assert c is not None
            assert c.queries == {"q1": batches - 1}
            assert c.messages == per_store[i]
            first = {q: s.min_offset_in_queue("Orders", q) for q in range(4)}
            assert min(first.values()) > 0, "consume queue files of deleted data were deleted"
    # Readers see what retention kept, up to the last committed batch.
    settings = RocketStoreReader({"path": str(root)}, MESSAGE_SCHEMA).settings
    queues = [q for q in list_queues(settings) if q.topic == "Orders"]
    assert all(0 < q.min_offset <= q.max_offset for q in queues)
    # Exactly once after cleanup: replayed batches (an old one, the last one) store nothing.
    ends = []
    for i in range(2):
        with rocketstore.MessageStore(root / store_name(i), read_only=True) as s:
            ends.append(s.max_commitlog_offset())
    for b in (3, batches - 1):
        for p in range(2):
            assert d.task(b, p, _bodies("replay", 60)).skipped == "committed"
    for i in range(2):
        with rocketstore.MessageStore(root / store_name(i), read_only=True) as s:
            assert s.max_commitlog_offset() == ends[i]


def test_the_commit_record_survives_cleanup_of_its_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = tmp_path / "sink"
    config: dict[str, Any] = {
        "mapped_file_size_commit_log": 64 * 1024,
        "mapped_file_size_consume_queue": 100 * 20,
        "max_hash_slot_num": 50,
        "max_index_num": 200,
    }
    d = SinkDriver(monkeypatch, str(root), stores="1", **SMALL)  # fileReservedTime: 72 hours
    d.batch(0, [_bodies("b0", 50)])
    store = root / store_name(0)
    assert (store / COMMIT_FILE).is_file()
    # Batch 1's run dies after its task appended rows over several files (never committed).
    d.task(1, 0, _bodies("dead", 500))
    assert _count(store, "commitlog") >= 4
    # Four days later a writer's cleanup deletes every expired file: the one with the commit
    # record too (rows that were never committed followed it into later files).
    with rocketstore.MessageStore(store, **config) as s:
        s._set_clock_ms(int(time.time() * 1000) + 4 * 24 * 3600 * 1000)
        report = s.delete_expired_files()
        assert report["commitlog_files_deleted"]
        assert _logged_commit(s) is None, "the commit record's file is gone"
        c = last_commit(s)  # ... its copy answers
        assert c is not None
        assert (c.batch, c.messages, c.queries) == (0, 50, {"q1": 0})
    # The restarted query: batch 0 replayed stores nothing; batch 1 is cut back and written once.
    d.run = "run-2"
    assert d.task(0, 0, _bodies("b0", 50)).skipped == "committed"
    d.batch(1, [_bodies("b1", 30)])
    with rocketstore.MessageStore(store, read_only=True) as s:
        c = last_commit(s)
        assert c is not None
        assert (c.batch, c.messages, c.queries) == (1, 80, {"q1": 1})
        got = [
            m.body.decode()
            for q in range(4)
            for m in s.get_message("Orders", q, s.min_offset_in_queue("Orders", q), 1000).messages
        ]
    assert sorted(got) == sorted(_bodies("b1", 30)), "no row of the dead run is left"
