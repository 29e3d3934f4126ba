"""Large Arrow read batches, which several threads build (on a machine with two or more cores:
two threads reading the commit log split the columns, otherwise threads take row ranges): the
same rows, the same batch ends and the same errors as batches of a few rows, which one thread
builds.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from rocketstore import MESSAGE_SCHEMA, MessageStore, _native
from rocketstore.exceptions import CorruptionError

CONFIG: dict[str, Any] = {
    "mapped_file_size_commit_log": 1 << 20,
    "mapped_file_size_consume_queue": 4096 * 20,
    "max_message_size": 8192,
}

N = 12_000


def fill(store: MessageStore) -> None:
    """N messages over 3 topics and 2 queues: tags or none, keys or none, ASCII and non-ASCII
    properties (the two ways properties are split), bodies of 60 to 460 bytes."""
    rows = []
    for i in range(N):
        props = {"n": str(i)} if i % 3 else ({"grüße": f"wert-{i}-ü"} if i % 7 == 0 else None)
        rows.append(
            {
                "topic": f"Topic{i % 3}",
                "body": (f"body-{i}-".encode() * 40)[: 60 + (i * 37) % 400],
                "queue_id": i % 2,
                "tags": None if i % 5 == 0 else ("TagÄ" if i % 11 == 0 else "TagA"),
                "keys": [] if i % 4 == 0 else [f"key-{i}", f"k{i % 10}"],
                "properties": props,
            }
        )
    put_dispatched(store, rows, 2000)


def put_dispatched(store: MessageStore, rows: list[dict[str, Any]], step: int) -> None:
    """``put_batch`` of ``rows``, ``step`` at a time, then waits until all are dispatched."""
    for at in range(0, len(rows), step):
        assert all(r.ok for r in store.put_batch(rows[at : at + step]))
    deadline = time.monotonic() + 60
    while store.stats()["dispatch_behind_bytes"] > 0:
        assert time.monotonic() < deadline, "dispatch did not catch up"
        time.sleep(0.005)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MessageStore]:
    with MessageStore(tmp_path_factory.mktemp("split") / "store", **CONFIG) as s:
        fill(s)
        yield s


def read_log(store: MessageStore, step: int, **kwargs: Any) -> list[pa.RecordBatch]:
    batches: list[pa.RecordBatch] = []
    offset = 0
    while True:
        batch, nxt = store.read_arrow(offset, max_messages=step, **kwargs)
        if batch.num_rows == 0:
            assert nxt == offset
            return batches
        batches.append(batch)
        offset = nxt


def table(batches: list[pa.RecordBatch]) -> pa.Table:
    return pa.Table.from_batches(batches, schema=MESSAGE_SCHEMA)


@pytest.fixture(autouse=True, params=[2, 4], ids=["two-threads-columns", "four-threads-rows"])
def threads(request: pytest.FixtureRequest) -> Iterator[int]:
    """Every test runs with two build threads (`read_arrow`: a column split) and four (row
    ranges), whatever the machine's cores."""
    before = _native._arrow_read_threads(request.param)
    yield request.param
    _native._arrow_read_threads(before)


def split_counts_since(before: tuple[int, int]) -> tuple[int, int]:
    """(split builds, split builds given up for one thread) since ``before``."""
    builds, fallbacks = _native._arrow_split_counts()
    return builds - before[0], fallbacks - before[1]


def assert_split_ran(before: tuple[int, int], *, expect_split: bool = True) -> None:
    """The large reads since ``before`` were split (when ``expect_split``) and none fell back
    to one thread (a fallback gives the same rows, so only this shows the split path works)."""
    builds, fallbacks = split_counts_since(before)
    assert fallbacks == 0
    if expect_split:
        assert builds > 0


def test_one_large_batch_equals_small_ones(big: MessageStore) -> None:
    before = _native._arrow_split_counts()
    large = read_log(big, 65536)
    assert_split_ran(before)
    assert large[0].num_rows >= 8192, "the first batch must be large enough to be split"
    small = read_log(big, 100)
    assert table(large).num_rows == N
    assert table(large).equals(table(small))
    nulls = table(large).column("tags").null_count
    assert 0 < nulls < N


@pytest.mark.parametrize("max_bytes", [1 << 20, 3 << 20])
def test_large_batches_end_where_one_thread_ends_them(big: MessageStore, max_bytes: int) -> None:
    """Each batch ends before the record that would take it past ``max_bytes``."""
    before = _native._arrow_split_counts()
    batches = read_log(big, 65536, max_bytes=max_bytes)
    # 1 MiB holds about 2,600 of these records: too few rows for two threads.
    assert_split_ran(before, expect_split=max_bytes >= 3 << 20)
    assert len(batches) > 1
    sizes = [[int(v or 0) for v in b.column("store_size").to_pylist()] for b in batches]
    for this, after in itertools.pairwise(sizes):
        assert sum(this) <= max_bytes < sum(this) + after[0]
    assert table(batches).equals(table(read_log(big, 100)))


def test_get_message_arrow_large_equals_small(big: MessageStore) -> None:
    for topic, queue_id, lo, hi in big.consume_queues():
        before = _native._arrow_split_counts()
        whole, nxt = big.get_message_arrow(topic, queue_id, lo, 65536)
        # 2,000 units per queue: below two threads' worth of rows, so built on one thread.
        assert_split_ran(before, expect_split=False)
        assert nxt == hi
        assert whole.num_rows == hi - lo >= 1000
        parts, offset = [], lo
        while offset < hi:
            batch, offset = big.get_message_arrow(topic, queue_id, offset, 100)
            parts.append(batch)
        assert table([whole]).equals(table(parts))


def test_get_message_arrow_split_over_one_long_queue(tmp_path: Path) -> None:
    """A queue long enough for several threads: the split batch equals batches of 100 rows."""
    n = 9_000
    with MessageStore(tmp_path / "store", **CONFIG) as s:
        rows = [
            {
                "topic": "Long",
                "body": (f"b{i}-".encode() * 60)[: 100 + (i * 13) % 200],
                "queue_id": 0,
                "tags": None if i % 6 == 0 else "TagL",
                "keys": [f"key-{i}"],
                "properties": {"grüße": "ü"} if i % 9 == 0 else {"n": str(i)},
            }
            for i in range(n)
        ]
        put_dispatched(s, rows, 3000)
        before = _native._arrow_split_counts()
        whole, nxt = s.get_message_arrow("Long", 0, 0, 65536)
        assert_split_ran(before)
        assert (whole.num_rows, nxt) == (n, n)
        parts, offset = [], 0
        while offset < n:
            batch, offset = s.get_message_arrow("Long", 0, offset, 100)
            parts.append(batch)
        assert table([whole]).equals(table(parts))
        # A tag filter decides per record: the rows cannot be planned, one thread builds them.
        before = _native._arrow_split_counts()
        tagged, nxt = s.get_message_arrow("Long", 0, 0, 65536, tags="TagL")
        assert_split_ran(before, expect_split=False)
        assert (tagged.num_rows, nxt) == (sum(1 for i in range(n) if i % 6), n)
        parts, offset = [], 0
        while offset < n:
            batch, offset = s.get_message_arrow("Long", 0, offset, 100, tags="TagL")
            parts.append(batch)
        assert table([tagged]).equals(table(parts))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_splits_its_own_reads(big: MessageStore, tmp_path: Path) -> None:
    """The helper threads a split read keeps for the next ones are not inherited by a forked
    child: a child's split read starts its own instead of waiting for threads it lacks."""
    rows = [
        {"topic": "Fork", "body": f"fork-{i}-".encode() * 12, "queue_id": 0, "keys": [f"k{i}"]}
        for i in range(6_000)
    ]
    with MessageStore(tmp_path / "store", **CONFIG) as s:
        put_dispatched(s, rows, 3000)
    before = _native._arrow_split_counts()
    whole, _ = big.read_arrow(0)
    assert_split_ran(before)
    with warnings.catch_warnings():
        # Python 3.12+ warns that forking a multi-threaded process may deadlock: what this
        # test is about (the child exits on its own, or is killed below).
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the forked child
        code = 1
        try:
            with MessageStore(tmp_path / "store", read_only=True, **CONFIG) as mine:
                counts = _native._arrow_split_counts()
                batch, nxt = mine.get_message_arrow("Fork", 0, 0, 65536)
                split = _native._arrow_split_counts()[0] > counts[0]
                ok = batch.num_rows == nxt == len(rows) and split
                ok = ok and batch.column("body")[5999].as_py() == rows[5999]["body"]
                code = 0 if ok else 3
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's split read did not finish in 60 s")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(done[1]) == 0
    # The parent's helpers still serve it.
    before = _native._arrow_split_counts()
    again, _ = big.read_arrow(0)
    assert_split_ran(before)
    assert again.equals(whole)


def test_split_batches_of_large_records_equal_small_ones(tmp_path: Path) -> None:
    """Records over 512 stored bytes: the bodies move with the properties columns when the
    threads split the work (the row ranges' merge, the column split). Large batches equal
    batches of 100 rows, through the commit log and through the queue."""
    n = 6_000
    with MessageStore(tmp_path / "store", **CONFIG) as s:
        rows = [
            {
                "topic": "Large",
                "body": (f"L{i}-".encode() * 300)[: 600 + (i * 29) % 500],
                "queue_id": 0,
                "tags": None if i % 5 == 0 else "TagL",
                "keys": [] if i % 7 == 0 else [f"key-{i}"],
                "properties": {"grüße": "ü"} if i % 9 == 0 else {"n": str(i)},
            }
            for i in range(n)
        ]
        put_dispatched(s, rows, 2000)
        before = _native._arrow_split_counts()
        whole, nxt = s.get_message_arrow("Large", 0, 0, 65536, max_bytes=64 << 20)
        assert_split_ran(before)
        assert (whole.num_rows, nxt) == (n, n)
        parts, offset = [], 0
        while offset < n:
            batch, offset = s.get_message_arrow("Large", 0, offset, 100)
            parts.append(batch)
        assert table([whole]).equals(table(parts))
        before = _native._arrow_split_counts()
        large = read_log(s, 65536, max_bytes=64 << 20)
        assert_split_ran(before)
        assert table(large).equals(table(read_log(s, 100)))
        assert table(large).num_rows == n


def test_damage_in_a_later_range_is_reported_like_one_thread(tmp_path: Path) -> None:
    with MessageStore(tmp_path / "store", **CONFIG) as s:
        fill(s)
        first = read_log(s, 65536)[0]
        row = first.num_rows * 3 // 4
        victim = first.slice(row, 1).to_pylist()[0]
        s.flush()
        offset = victim["commitlog_offset"]
        name = max(f for f in s.commitlog_files() if int(Path(f).name) <= offset)
        body = victim["body"]
        data = Path(name).read_bytes()
        pos = data.find(body, offset - int(Path(name).name))
        with open(name, "r+b") as fh:
            fh.seek(pos + len(body) // 2)
            fh.write(bytes([data[pos + len(body) // 2] ^ 0xFF]))
        before = _native._arrow_split_counts()
        with pytest.raises(CorruptionError) as info:
            s.read_arrow(0, verify_crc=True)
        assert info.value.offset == offset
        # The thread that checks the CRCs failed, so the batch was built again on one thread,
        # which reports the error where a sequential read does.
        assert split_counts_since(before) == (0, 1)
        assert info.value.kind == "CRC mismatch"
        with pytest.raises(CorruptionError) as info:
            s.get_message_arrow(victim["topic"], victim["queue_id"], 0, verify_crc=True)
        assert info.value.offset == offset
        # Without verification the damaged body is returned as stored.
        damaged = read_log(s, 65536)[0]
        assert damaged.num_rows == first.num_rows
        assert damaged.column("body")[row].as_py() != body
