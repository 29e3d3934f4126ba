"""Round trips through the Python API: put, put_batch (dicts), reads, scans, reopen, files."""

from __future__ import annotations

import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import rocketstore
from rocketstore import Message, MessageStore, PutResult

#: Small consume queue and index files: the defaults (6 MB per queue, a 420 MB index file)
#: make every store in a test slow to create and to checksum.
SIDE_FILES: dict[str, Any] = {
    "mapped_file_size_consume_queue": 20 * 1024,
    "max_hash_slot_num": 1024,
    "max_index_num": 4096,
}

SMALL: dict[str, Any] = {**SIDE_FILES, "mapped_file_size_commit_log": 64 * 1024}
MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB
MAGIC_BLANK = 0xCBD43194


def record_magic(path: Path, file_size: int, offset: int) -> int:
    """The MAGIC field of the record at absolute commit log ``offset``."""
    name = path / "commitlog" / f"{offset // file_size * file_size:020d}"
    with name.open("rb") as f:
        f.seek(offset % file_size + 4)
        magic: int = struct.unpack(">I", f.read(4))[0]
    return magic


def walk_commitlog_file(data: bytes) -> tuple[list[tuple[int, int]], int | None]:
    """Records ``(position, size)`` of one commit log file, and the BLANK's position (or None)."""
    records: list[tuple[int, int]] = []
    pos = 0
    while pos + 8 <= len(data):
        size, magic = struct.unpack_from(">iI", data, pos)
        if magic == MAGIC_BLANK:
            assert pos + size == len(data), "the END_OF_FILE blank must fill the rest of the file"
            return records, pos
        if magic not in (MAGIC_V1, MAGIC_V2):
            assert (size, magic) == (0, 0), f"garbage at {pos}"
            break
        assert 0 < size <= len(data) - pos, "a record must not span files"
        records.append((pos, size))
        pos += size
    return records, None


def test_put_and_look_message_round_trip(store_dir: Path) -> None:
    with MessageStore(store_dir, **SMALL) as store:
        r = store.put(
            "TopicTest",
            b"hello world",
            queue_id=3,
            tags="TagA",
            keys=["order-1", "user-7"],
            properties={"source": "web", "trace": "abc"},
            flag=7,
            born_timestamp=1_700_000_000_123,
            born_host="10.0.0.5:51000",
        )
        assert isinstance(r, PutResult)
        assert r.status == "PUT_OK"
        assert r.ok
        assert r.commitlog_offset == 0
        assert r.queue_offset == 0
        assert r.wrote_bytes > len(b"hello world")
        assert len(r.msg_id) == 32
        assert r.msg_id == r.msg_id.upper()

        m = store.look_message_by_offset(r.commitlog_offset)
        assert isinstance(m, Message)
        assert m.topic == "TopicTest"
        assert m.body == b"hello world"
        assert m.queue_id == 3
        assert m.queue_offset == 0
        assert m.commitlog_offset == r.commitlog_offset
        assert m.store_size == r.wrote_bytes
        assert m.tags == "TagA"
        assert m.keys == ["order-1", "user-7"]
        assert m.properties["source"] == "web"
        assert m.properties["trace"] == "abc"
        assert m.properties["TAGS"] == "TagA"
        assert m.properties["KEYS"] == "order-1 user-7"
        assert m.uniq_key is not None
        assert m.properties["UNIQ_KEY"] == m.uniq_key
        assert m.flag == 7
        assert m.born_timestamp == 1_700_000_000_123
        assert m.born_host == "10.0.0.5:51000"
        assert m.store_host == "127.0.0.1:10911"
        assert m.store_timestamp == r.store_timestamp
        assert m.msg_id == r.msg_id
        assert m.reconsume_times == 0
        assert m.prepared_transaction_offset == 0
        assert m.sys_flag == 0
        assert isinstance(m.body_crc, int)
        assert m == store.look_message_by_offset(r.commitlog_offset)
        assert hash(m) == hash(store.look_message_by_offset(r.commitlog_offset))
        assert "TopicTest" in repr(m)
        assert "b'hello world'" in repr(m)
        assert repr(r).startswith("PutResult(status='PUT_OK'")


def test_put_defaults_and_body_types(store_dir: Path) -> None:
    with MessageStore(store_dir, **SMALL) as store:
        offsets = [
            store.put("T", b"bytes").commitlog_offset,
            store.put("T", bytearray(b"bytearray")).commitlog_offset,
            store.put("T", memoryview(b"xxmemoryviewxx")[2:-2]).commitlog_offset,
            store.put("T", b"k", keys="single-key").commitlog_offset,
            store.put("T", b"t", keys=("a", "b")).commitlog_offset,
        ]
        got = [store.look_message_by_offset(o) for o in offsets]
        assert [m.body for m in got] == [b"bytes", b"bytearray", b"memoryview", b"k", b"t"]
        assert got[0].tags is None
        assert got[0].keys == []
        assert got[0].queue_id == 0
        assert got[3].keys == ["single-key"]
        assert got[4].keys == ["a", "b"]
        assert [m.queue_offset for m in got] == [0, 1, 2, 3, 4]


def test_put_batch_dicts(store_dir: Path) -> None:
    with MessageStore(store_dir, **SMALL) as store:
        results = store.put_batch(
            [
                {"topic": "A", "body": b"a0"},
                {"topic": "A", "body": b"a1", "queue_id": 1, "tags": "x"},
                {"topic": "B", "body": b"b0", "keys": ["k"], "properties": {"p": "v"}},
                {"topic": "A", "body": b"a2"},
            ]
        )
        assert [r.status for r in results] == ["PUT_OK"] * 4
        assert [r.queue_offset for r in results] == [0, 0, 0, 1]
        offsets = [r.commitlog_offset for r in results]
        assert offsets == sorted(offsets)
        msgs = [store.look_message_by_offset(o) for o in offsets]
        assert [(m.topic, m.queue_id, m.body) for m in msgs] == [
            ("A", 0, b"a0"),
            ("A", 1, b"a1"),
            ("B", 0, b"b0"),
            ("A", 0, b"a2"),
        ]
        assert msgs[2].properties["p"] == "v"
        assert msgs[2].keys == ["k"]
        assert store.put_batch([]) == []
        assert store.put_batch(({"topic": "A", "body": b"t"},))[0].queue_offset == 2


def test_scan_iterates_everything_in_order(store_dir: Path) -> None:
    with MessageStore(store_dir, **SMALL) as store:
        written = [store.put(f"T{i % 3}", f"body-{i}".encode() * 20) for i in range(500)]
        msgs = list(store.scan())
        assert [m.commitlog_offset for m in msgs] == [r.commitlog_offset for r in written]
        assert [m.body for m in msgs] == [f"body-{i}".encode() * 20 for i in range(500)]

        it = store.scan(verify_crc=True)
        assert iter(it) is it
        first = it.next_batch(7)
        assert len(first) == 7
        assert it.offset == written[7].commitlog_offset
        rest = it.next_batch(10_000)
        assert len(rest) == 493
        assert it.next_batch(5) == []
        assert it.next_batch(0) == []
        with pytest.raises(StopIteration):
            next(it)

        middle = written[250].commitlog_offset
        assert [m.commitlog_offset for m in store.scan(middle)] == [
            r.commitlog_offset for r in written[250:]
        ]
        assert list(store.scan(store.max_commitlog_offset())) == []


def test_small_files_roll_with_blank_and_no_spanning_record(store_dir: Path) -> None:
    file_size = 64 * 1024
    with MessageStore(store_dir, **SIDE_FILES, mapped_file_size_commit_log=file_size) as store:
        results = []
        for i in range(40):
            # Varied sizes so that file ends fall at different places.
            results += store.put_batch(
                [{"topic": "Roll", "body": bytes([i]) * (100 + 37 * j)} for j in range(20)]
            )
        files = store.commitlog_files()
        assert len(files) >= 5
        for r in results:
            first_file = r.commitlog_offset // file_size
            last_file = (r.commitlog_offset + r.wrote_bytes - 1) // file_size
            assert first_file == last_file, "a record spans two files"
        assert [m.commitlog_offset for m in store.scan()] == [r.commitlog_offset for r in results]
        store.flush()
        names = [Path(f).name for f in files]
        assert names == [f"{k * file_size:020d}" for k in range(len(files))]
        total = 0
        for k, f in enumerate(files):
            data = Path(f).read_bytes()
            assert len(data) == file_size
            records, blank = walk_commitlog_file(data)
            total += len(records)
            if k < len(files) - 1:
                assert blank is not None, f"file {k} does not end with an END_OF_FILE blank"
        assert total == len(results)


def test_reopen_keeps_everything_and_queue_offsets_continue(store_dir: Path) -> None:
    with MessageStore(store_dir, **SMALL) as store:
        first = [store.put("Q", f"m{i}".encode() * 50, queue_id=i % 2) for i in range(300)]
        max_offset = store.max_commitlog_offset()
    with MessageStore(store_dir, **SMALL) as store:
        report = store.recovery_report
        assert report["abnormal"] is False
        assert store.max_commitlog_offset() == max_offset
        assert [m.body for m in store.scan()] == [f"m{i}".encode() * 50 for i in range(300)]
        assert store.queue_offsets() == [("Q", 0, 150), ("Q", 1, 150)]
        r = store.put("Q", b"next", queue_id=1)
        assert r.queue_offset == 150
        assert r.commitlog_offset == max_offset
        assert store.look_message_by_offset(first[10].commitlog_offset).body == b"m10" * 50


def test_clean_reopen_from_the_checkpoint_reads_nothing(store_dir: Path) -> None:
    """``normal_recovery_from_checkpoint=True``: the clean reopen walks from the end the
    shutdown recorded; the default walks the last three commit log files."""
    with MessageStore(store_dir, **SMALL) as store:
        for i in range(400):
            store.put("Q", f"m{i}".encode() * 60)
        end = store.max_commitlog_offset()
    with MessageStore(store_dir, normal_recovery_from_checkpoint=True, **SMALL) as store:
        report = store.recovery_report
        assert (report["scan_start_offset"], report["walked_bytes"]) == (end, 0)
        assert store.max_commitlog_offset() == end
        assert store.get_message("Q", 0, 399, 1).messages[0].body == b"m399" * 60
    with MessageStore(store_dir, **SMALL) as store:
        assert store.recovery_report["walked_bytes"] > 0


def test_v2_record_for_long_topics(store_dir: Path) -> None:
    with MessageStore(store_dir, **SMALL) as store:
        short = store.put("t" * 127, b"v1")
        long = store.put("t" * 200, b"v2")
        longest = store.put("t" * 255, b"v2")
        store.flush()
        file_size = int(store.config["mapped_file_size_commit_log"])
        assert record_magic(store_dir, file_size, short.commitlog_offset) == MAGIC_V1
        assert record_magic(store_dir, file_size, long.commitlog_offset) == MAGIC_V2
        assert store.look_message_by_offset(longest.commitlog_offset).topic == "t" * 255


def test_offsets_cursors_and_introspection(store_dir: Path) -> None:
    with MessageStore(store_dir, **SMALL) as store:
        assert store.min_commitlog_offset() == 0
        assert store.max_commitlog_offset() == 0
        r = store.put("T", b"x" * 10)
        assert store.max_commitlog_offset() == r.wrote_bytes
        durable = store.flush()
        assert durable == r.wrote_bytes
        c = store.cursors()
        assert c == {"wrote": r.wrote_bytes, "committed": r.wrote_bytes, "flushed": r.wrote_bytes}
        assert store.flush_count() >= 1
        assert store.queue_offsets() == [("T", 0, 1)]
        assert store.path == str(store_dir)
        assert store.read_only is False
        assert store.closed is False
        assert Path(store.commitlog_files()[0]).parent == store_dir / "commitlog"
        assert str(store_dir) in repr(store)
        assert "open" in repr(store)
    assert "closed" in repr(store)


def test_config_kwargs_and_fields(store_dir: Path) -> None:
    fields = rocketstore.config_fields()
    names = [f.name for f in fields]
    assert len(names) == len(set(names))
    by_name = {f.name: f for f in fields}
    size = by_name["mapped_file_size_commit_log"]
    assert size.kind == "int"
    assert size.rocketmq_name == "mappedFileSizeCommitLog"
    assert size.default == 1024 * 1024 * 1024
    assert size.min is not None
    assert size.max is not None
    assert size.min <= 65536 <= size.max
    assert by_name["flush_disk_type"].kind == "str"
    assert by_name["flush_disk_type"].default == "ASYNC_FLUSH"
    assert by_name["fsync_directory"].kind == "bool"
    assert all(f.doc for f in fields)
    assert "mapped_file_size_commit_log" in repr(size)

    with MessageStore(
        store_dir,
        **SIDE_FILES,
        mapped_file_size_commit_log=65536,
        flush_disk_type="SYNC_FLUSH",
        max_message_size=2048,
        fsync_directory=False,
    ) as store:
        config = store.config
        assert set(config) == set(names)
        assert config["mapped_file_size_commit_log"] == 65536
        assert config["flush_disk_type"] == "SYNC_FLUSH"
        assert config["max_message_size"] == 2048
        assert config["fsync_directory"] is False
        assert store.put("T", b"durable").status == "PUT_OK"


def test_concurrent_puts_from_threads(store_dir: Path) -> None:
    threads_n, per_thread = 4, 500
    errors: list[BaseException] = []
    results: dict[int, list[PutResult]] = {}
    with MessageStore(store_dir, **SMALL) as store:
        barrier = threading.Barrier(threads_n)

        def worker(t: int) -> None:
            try:
                barrier.wait()
                mine = [store.put("Conc", f"{t}:{i}".encode(), queue_id=t) for i in range(200)]
                mine += store.put_batch(
                    [
                        {"topic": "Conc", "body": f"{t}:b{i}".encode(), "queue_id": t}
                        for i in range(300)
                    ]
                )
                results[t] = mine
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(threads_n)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors
        all_results = [r for rs in results.values() for r in rs]
        assert len(all_results) == threads_n * per_thread
        assert all(r.ok for r in all_results)
        assert len({r.commitlog_offset for r in all_results}) == len(all_results)
        for rs in results.values():
            assert [r.queue_offset for r in rs] == list(range(per_thread))
        assert sum(1 for _ in store.scan()) == threads_n * per_thread


def test_scan_from_several_threads(store_dir: Path) -> None:
    with MessageStore(store_dir, **SMALL) as store:
        store.put_batch([{"topic": "S", "body": bytes(100)} for _ in range(3000)])
        counts: list[int] = []

        def reader() -> None:
            counts.append(sum(len(b) for b in iter(lambda: it.next_batch(100), [])))

        it = store.scan()
        threads = [threading.Thread(target=reader) for _ in range(3)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        # Shared iterator: the three readers split the messages between them.
        assert sum(counts) == 3000


def test_cli_demo_and_inspect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rocketstore import cli

    store = tmp_path / "demo"
    small = ["--file-size", str(1 << 20), "-q"]
    demo = [
        "demo",
        "--no-spark",
        "--store",
        str(store),
        "--messages",
        "5000",
        "--batch-size",
        "1500",
    ]
    assert cli.main([*demo, *small]) == 0
    out = capsys.readouterr().out
    assert "put_batch: 5,000 msgs in" in out
    assert " msg/s" in out
    assert "scan: 5,000 msgs" in out
    assert "-> OK" in out

    # Running it again replaces the previous demo store.
    assert cli.main(["demo", "--no-spark", "--store", str(store), "--messages", "100", *small]) == 0
    capsys.readouterr()

    info = cli.inspect_store(store)
    assert sum(q["next_offset"] for q in info["queues"]) == 100
    assert info["recovery"]["abnormal"] is False
    assert info["files"][0]["name"] == "0" * 20
    assert cli.main(["inspect", str(store)]) == 0
    text = capsys.readouterr().out
    assert "DemoTopic0" in text
    assert "clean" in text
    assert cli.main(["inspect", "-c", "mapped_file_size_consume_queue=6000000", str(store)]) == 0
    capsys.readouterr()
    assert cli.main(["inspect", "--json", str(store)]) == 0
    assert '"queues"' in capsys.readouterr().out

    # A directory that is not a store is never deleted by the demo.
    other = tmp_path / "precious"
    other.mkdir()
    (other / "data.txt").write_text("keep me")
    assert cli.main(["demo", "--no-spark", "--store", str(other), "--messages", "10", *small]) == 2
    assert (other / "data.txt").read_text() == "keep me"

    assert cli.main(["inspect", str(tmp_path / "missing")]) == 4  # not found
    assert "no such file or directory" in capsys.readouterr().err


def test_cli_help_mentions_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    from rocketstore import cli

    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for word in ("demo", "inspect", "bench", "examples:"):
        assert word in out


def test_long_calls_release_the_gil(store_dir: Path) -> None:
    """While a big put_batch runs in a thread, the main thread keeps running Python code."""
    import pyarrow as pa

    n = 300_000
    table = pa.table({"topic": ["Gil"] * n, "body": [b"g" * 100] * n})
    with MessageStore(store_dir, **{**SMALL, "mapped_file_size_commit_log": 64 << 20}) as store:
        done = threading.Event()
        span: list[float] = []

        def writer() -> None:
            t0 = time.perf_counter()
            store.put_batch(table)
            span.append(time.perf_counter() - t0)
            done.set()

        th = threading.Thread(target=writer)
        last = time.perf_counter()
        max_gap = 0.0
        th.start()
        while not done.is_set():
            now = time.perf_counter()
            max_gap = max(max_gap, now - last)
            last = now
        th.join()
        # If the GIL were held for the whole call, this loop would stall for all of it.
        assert max_gap < max(0.05, span[0] / 2), (max_gap, span[0])


def _fincore() -> str:
    """The util-linux ``fincore`` command (the test is skipped without it)."""
    import shutil

    fincore = shutil.which("fincore")
    if fincore is None:
        pytest.skip("needs util-linux fincore to count resident pages")
    return fincore


def _resident(fincore: str, files: list[Path]) -> int:
    """Bytes of ``files`` resident in the page cache."""
    import subprocess

    out = subprocess.run(
        [fincore, "--bytes", "--noheadings", "--output", "RES", *map(str, files)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sum(int(x) for x in out.split())


def _put_ten_in_each_of_256_queues(s: MessageStore) -> None:
    """10 messages of 100 B into each of 256 queues of topic ``Many``, then waits for dispatch."""
    s.put_batch(
        [
            {"topic": "Many", "queue_id": q, "body": b"x" * 100}
            for q in range(256)
            for _ in range(10)
        ]
    )
    deadline = time.monotonic() + 30
    while s.stats().get("dispatch_behind_bytes", 0) > 0 and time.monotonic() < deadline:
        time.sleep(0.005)


def test_new_queues_keep_only_the_pages_they_write_in_memory(store_dir: Path) -> None:
    """A consume queue file's (and an index file's) first write faults in one page, not the
    device's read-ahead window around it: 256 queues of 10 units each keep about one page
    per queue in the page cache, not a zero-filled copy of every 5.7 MB file (the files are
    mapped with ``MADV_RANDOM``; on a disk with 8 MiB read-ahead the old mapping held
    1.4 GiB for these 2,560 messages)."""
    fincore = _fincore()
    with MessageStore(store_dir, populate_mapped_file=False) as s:
        _put_ten_in_each_of_256_queues(s)
        cq = sorted(p for p in (store_dir / "consumequeue").rglob("*") if p.is_file())
        index = sorted(p for p in (store_dir / "index").iterdir() if p.is_file())
        assert len(cq) == 256
        assert len(index) == 1

        page = 4096
        assert _resident(fincore, cq) <= 256 * 2 * page, _resident(fincore, cq)
        # 2,560 keys (UNIQ_KEY) in the 20 MB slot table touch at most 2,560 slot pages, plus
        # the header and the entries: far less than the whole file.
        assert _resident(fincore, index) <= (2_560 + 16) * page, _resident(fincore, index)


def test_reopened_queues_keep_only_the_pages_they_read_in_memory(store_dir: Path) -> None:
    """Reopening a store with many small queues reads each queue's last file ahead in 64 KiB
    chunks and scans only the extents the file system holds data in (``SEEK_DATA``) for stale
    bytes: its page cache stays about one chunk per queue, not the 5.7 MB of every file (1.4 GiB
    for these 256 queues on a disk with 8 MiB read-ahead, and 4.6 s to reopen). Appending after
    the reopen keeps it there, and every message reads back."""
    import os

    fincore = _fincore()
    with MessageStore(store_dir, populate_mapped_file=False) as s:
        _put_ten_in_each_of_256_queues(s)
    cq = sorted(p for p in (store_dir / "consumequeue").rglob("*") if p.is_file())
    assert len(cq) == 256
    os.sync()
    for p in cq:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    page, chunk = 4096, 64 * 1024
    if _resident(fincore, cq) > 256 * page:
        pytest.skip("the page cache kept the files after POSIX_FADV_DONTNEED")
    with MessageStore(store_dir, populate_mapped_file=False) as s:
        assert _resident(fincore, cq) <= 256 * (chunk + 2 * page), _resident(fincore, cq)
        _put_ten_in_each_of_256_queues(s)
        assert _resident(fincore, cq) <= 256 * (chunk + 2 * page), _resident(fincore, cq)
        for q in (0, 255):
            got = s.get_message("Many", q, 0, 32)
            assert [m.queue_offset for m in got.messages] == list(range(20))
