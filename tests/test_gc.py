"""No leaks: references, Python and native memory, threads, file descriptors, mappings."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketstore import MessageStore
from rocketstore.exceptions import InvalidMessageError

#: Small consume queue and index files: the defaults (6 MB per queue, a 420 MB index file)
#: make every store in a test slow to create and to checksum.
SIDE_FILES: dict[str, Any] = {
    "mapped_file_size_consume_queue": 20 * 1024,
    "max_hash_slot_num": 1024,
    "max_index_num": 4096,
}

SMALL: dict[str, Any] = {**SIDE_FILES, "mapped_file_size_commit_log": 64 * 1024}

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="reads /proc (Linux)"
)


def rss_anon_kib() -> int:
    """Anonymous resident memory (heap, not the store's file-backed mappings), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc/self/status")


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def mappings_under(root: Path) -> list[str]:
    return [line for line in Path("/proc/self/maps").read_text().splitlines() if str(root) in line]


def python_growth(fn: Callable[[], None], warmup: int, rounds: int) -> int:
    """Bytes of Python memory still allocated after ``rounds`` calls (after a warm-up)."""
    for _ in range(warmup):
        fn()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(rounds):
            fn()
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    return sum(s.size_diff for s in after.compare_to(before, "filename"))


def test_put_and_read_keep_no_references(store_dir: Path) -> None:
    topic = "".join(["Gc", "Topic"])  # a fresh str object, not an interned constant
    body = b"x" * 100
    tags = "".join(["Ta", "g"])
    keys = ["k1", "k2"]
    properties = {"a": "b"}
    objects = [topic, body, tags, keys, properties]
    with MessageStore(store_dir, **SMALL) as store:
        before = [sys.getrefcount(o) for o in objects]
        offsets = [
            store.put(topic, body, tags=tags, keys=keys, properties=properties).commitlog_offset
            for _ in range(10_000)
        ]
        batch = [
            {"topic": topic, "body": body, "tags": tags, "keys": keys, "properties": properties}
        ]
        for _ in range(1000):
            store.put_batch(batch)
        del batch
        for o in offsets:
            m = store.look_message_by_offset(o)
            assert m.body == body
        del m
        for _ in range(1000):
            with contextlib.suppress(InvalidMessageError):
                store.put(topic, body, properties={"TAGS": tags})
        gc.collect()
        assert [sys.getrefcount(o) for o in objects] == before


def test_reads_do_not_leak(store_dir: Path) -> None:
    with MessageStore(store_dir, **SMALL) as store:
        offsets = [
            r.commitlog_offset for r in store.put_batch([{"topic": "T", "body": b"y" * 200}] * 1000)
        ]

        def read() -> None:
            for o in offsets:
                m = store.look_message_by_offset(o)
                _ = (m.body, m.properties, m.keys, m.topic, m.msg_id, repr(m))

        def scan() -> None:
            it = store.scan()
            while batch := it.next_batch(100):
                assert len(batch) == 100

        anon = rss_anon_kib()
        assert python_growth(read, warmup=1, rounds=10) < 64 * 1024
        assert python_growth(scan, warmup=1, rounds=10) < 64 * 1024
        # Native memory: 20,000 reads and 10,000 scanned messages must not keep any.
        assert rss_anon_kib() - anon < 8 * 1024


def test_puts_do_not_leak_native_memory(store_dir: Path) -> None:
    with MessageStore(store_dir, **SIDE_FILES, mapped_file_size_commit_log=64 << 20) as store:
        batch = [{"topic": "T", "body": b"z" * 100, "keys": ["a"], "properties": {"p": "q"}}] * 100
        for _ in range(20):
            store.put_batch(batch)
        anon = rss_anon_kib()
        for _ in range(100):
            store.put_batch(batch)
        for _ in range(2000):
            store.put("T", b"z" * 100, tags="t")
        assert rss_anon_kib() - anon < 8 * 1024


def test_open_put_close_cycles_leave_nothing_behind(tmp_path: Path) -> None:
    root = tmp_path / "cycles"
    gc.collect()
    threads, fds = thread_count(), fd_count()
    for i in range(200):
        store = MessageStore(root, **SMALL)
        store.put("Cycle", f"round {i}".encode())
        if i == 0:
            assert thread_count() > threads, "the store runs background threads"
            assert mappings_under(root), "the store maps its files"
        it = store.scan()
        assert next(it).body == b"round 0"
        del it
        store.close()
        del store
    gc.collect()
    assert thread_count() == threads
    assert fd_count() == fds
    assert mappings_under(root) == []
    with MessageStore(root, read_only=True, **SIDE_FILES) as ro:
        assert sum(1 for _ in ro.scan()) == 200
    assert mappings_under(root) == []
    assert fd_count() == fds


def test_iterator_keeps_mappings_until_collected(store_dir: Path) -> None:
    store = MessageStore(store_dir, **SMALL)
    store.put("T", b"x")
    it = store.scan()
    store.close()
    del store
    gc.collect()
    # The iterator refers to the closed handle and raises; dropping it releases everything.
    with pytest.raises(Exception, match="closed"):
        next(it)
    del it
    gc.collect()
    assert mappings_under(store_dir) == []


def test_import_starts_no_threads() -> None:
    """Threads start when a store is opened, never at import (fork-safe, PySpark daemons)."""
    import subprocess
    import sys

    code = (
        "import os, rocketstore, rocketstore.cli, rocketstore.exceptions\n"
        "print(len(os.listdir('/proc/self/task')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.strip() == "1"
