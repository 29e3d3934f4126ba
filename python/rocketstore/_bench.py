"""``rocketstore bench``: rocketstore against the baselines, in one run, on the same data.

For each body size, one Arrow table of messages (4 topics x 8 queues, a tag and a unique key
per message) is built once, then measured with:

========================  ==============================================================
figure                    what is timed
========================  ==============================================================
``put``                   ``store.put(...)`` once per message (time-boxed by ``--seconds``)
``put_batch``             ``store.put_batch(table slice)`` in ``--batch``-row slices
``get_message``           ``store.get_message(topic, queue, offset, 32)`` over every queue
``read_arrow``            ``store.read_arrow(offset)``: the whole commit log as Arrow batches
                          of up to 65,536 messages
``get_message_arrow``     ``store.get_message_arrow(topic, queue, offset)`` over every queue
``pull_wake``             a ``store.pull`` waiting in a thread, woken by one ``put``
                          (latency from the put call to the pull's return)
``query_message``         ``store.query_message(topic, key, max_num=4)``, random keys
``query_messages``        ``store.query_messages(topic, keys, max_num=4)``: the same
                          random keys, 256 of one topic per call
``recovery``              ``MessageStore(path)`` after a crash (abort file present,
                          checkpoint, consume queues and index removed): scan + CRC +
                          rebuild of the whole commit log
``file_write`` (floor)    the same encoded records (read back from the commit log)
                          appended to a plain file with ``write`` per batch
``mmap_memcpy`` (ceiling) the same records copied into a preallocated, pre-faulted
                          ``mmap`` by slice assignment per batch
``sqlite_*``              an SQLite durable queue ``(id INTEGER PRIMARY KEY, topic, body)``,
                          WAL, ``synchronous=NORMAL``: ``executemany`` per batch in one
                          transaction; one autocommitted ``INSERT`` per message; batches of
                          32 rows by id; lookups by id, one per ``SELECT`` and
                          256 per ``SELECT ... WHERE id IN (...)``
``file_read``             the commit log files read with ``readinto`` (the scan floor)
``spark_*`` (--spark)     the same DataFrame written as Parquet and as ``rocketstore``;
                          ``spark_read_*``: each read back, ``sum(length(body))``
                          (``spark_rocketstore``/``spark_read_rocketstore``: the JVM writer
                          and reader when the jar was built);
                          ``spark_rocketstore_py``: the Python writer, same session;
                          ``spark_read_rocketstore_py``: the Python reader, same session;
                          ``spark_read_rocketstore_body``: Python, ``.schema("body binary")``
========================  ==============================================================

MB/s is body (payload) bytes per second for every figure, so rows compare directly; each
rocketstore figure also shows its ratio to its baseline (msgs/s over msgs/s). ``CPU ns/msg`` is
the process CPU time (``time.process_time()``: every thread of the process, so the store's
dispatch, allocation and flush threads too) spent in the timed calls, per message; for
``put_batch`` it also includes the dispatch catch-up after the last call. For the ``spark_*``
figures it is the CPU time of the whole process tree (the driver, Spark's JVM and its Python
workers, from ``/proc``).
Read-path figures are skipped, with a note, when the installed binding lacks the method.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import rocketstore
from rocketstore._bench_common import QUEUES, TOPICS, Figure, tree_cpu_seconds
from rocketstore._bench_common import has as _has
from rocketstore._bench_common import wait_dispatched as _wait_dispatched

__all__ = ["BenchOptions", "Figure", "run"]

_TAGS = ("TagA", "TagB", "TagC")

# Which baseline each figure is compared with (ratio = msgs/s over the baseline's msgs/s).
BASELINE_OF = {
    "put": "sqlite_insert",
    "put_batch": "sqlite_executemany",
    "get_message": "sqlite_read",
    "read_arrow": "file_read",
    "get_message_arrow": "file_read",
    "query_message": "sqlite_lookup",
    "query_messages": "sqlite_lookup_batch",
    "recovery": "file_read",
    "spark_rocketstore": "spark_parquet",
    "spark_rocketstore_py": "spark_parquet",
    "spark_read_rocketstore": "spark_read_parquet",
    "spark_read_rocketstore_py": "spark_read_parquet",
    "spark_read_rocketstore_body": "spark_read_parquet",
    "spark_sink": "spark_batch_files",
    # --peers: rocketstore beside LMDB (the fastest peer of the key-value stores)
    "peers_rocketstore_append": "peers_lmdb_append",
    "peers_rocketstore_read": "peers_lmdb_read",
    "peers_rocketstore_read_body": "peers_lmdb_read",
    "peers_rocketstore_lookup": "peers_lmdb_lookup",
    # --follow: the cross-process wake beside the in-process one, the tailing reader beside
    # the writer it follows
    "follow_wake": "pull_wake_local",
    "follow_tail": "follow_write",
}
# put_batch is also shown against the I/O floor and the physical ceiling.
BOUNDS = ("file_write", "mmap_memcpy")


@dataclass
class BenchOptions:
    """Knobs of one run (the ``rocketstore bench`` command line)."""

    sizes: list[int] = field(default_factory=lambda: [100, 1024, 4096])
    messages: int | None = None  # None: up to 1,000,000 and --max-mb of bodies per size
    max_mb: int = 256
    seconds: float = 2.0
    batch: int = 16_384
    file_size: int = 256 * 1024 * 1024
    dir: str | None = (
        None  # parent of the work directory; default $ROCKETSTORE_BENCH_DIR or $TMPDIR
    )
    spark: bool = False
    spark_messages: int = 400_000  # --spark: rows of 1 KiB, a tag and a key each
    spark_size: int = 1024
    peers: bool = False
    peer_messages: int = 1_000_000  # --peers: messages per body size
    peer_lookups: int = 100_000
    peer_seconds: float = 5.0  # time box of a peer's lookups (the scanning ones)
    scale: bool = False
    follow: bool = False  # --follow: a reader process following the writer (_bench_follow)
    remote: bool = False  # --remote: Spark on an S3 server beside Parquet (_bench_remote)
    remote_messages: int = 200_000
    scale_sizes: list[int] = field(default_factory=lambda: [1, 4])  # GiB of commit log
    scale_unit: int = 1 << 30
    scale_batch: int = 16_384
    scale_options: dict[str, Any] = field(default_factory=dict)
    smoke: bool = False
    json_path: str | None = None
    markdown: str | None = None  # BENCHMARKS.md: its tables replaced by this run's
    plot: str | None = None  # PNG of the peers' figures
    criterion: str | None = None  # target/criterion of a `cargo bench` run, for the page
    criterion_summary: str | None = None  # $ROCKETSTORE_BENCH_SUMMARY of that run
    since: float | None = None  # epoch seconds `make bench` started (its duration on the page)
    quiet: bool = False

    @classmethod
    def smoke_defaults(cls) -> BenchOptions:
        """The ``--smoke`` run: small, all figures, well under 10 s (with ``--peers`` and
        ``--scale``: tiny stores of those too)."""
        return cls(
            sizes=[100, 1024],
            messages=10_000,
            seconds=0.1,
            batch=4096,
            smoke=True,
            spark_messages=4096,
            peer_messages=10_000,
            peer_lookups=1000,
            peer_seconds=0.5,
            scale_sizes=[1, 2],
            scale_unit=8 << 20,
            scale_batch=512,
            scale_options={
                "mapped_file_size_commit_log": 4 << 20,
                "mapped_file_size_consume_queue": 20 * 8192,
                "max_hash_slot_num": 4096,
                "max_index_num": 65_536,
            },
        )

    def messages_for(self, size: int) -> int:
        if self.messages is not None:
            return self.messages
        return max(1000, min(1_000_000, self.max_mb * 1_000_000 // size))


# --------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------


def bench_table(n: int, body_size: int) -> Any:
    """``n`` messages: topic ``BenchTopic{i % 4}``, queue ``i // 4 % 8``, a tag, key ``k-{i}``
    and a ``body_size``-byte body starting with the row number (vectorized pyarrow)."""
    import pyarrow as pa
    import pyarrow.compute

    pc: Any = pyarrow.compute
    idx = pa.array(range(n), pa.int64())
    digits = pc.utf8_lpad(pc.cast(idx, pa.string()), 10, "0")
    filler = ("0123456789abcdefghijklmnopqrstuvwxyz" * (body_size // 36 + 2))[: max(0, body_size)]
    body = pc.binary_join_element_wise(digits, "|", filler, "")
    body = pc.cast(pc.utf8_slice_codeunits(body, 0, body_size), pa.binary())
    topic_ids = pa.array([i % TOPICS for i in range(n)], pa.int32())
    topic_names = pa.array([f"BenchTopic{t}" for t in range(TOPICS)], pa.string())
    return pa.table(
        {
            "topic": pa.DictionaryArray.from_arrays(topic_ids, topic_names),
            "body": body,
            "queue_id": pa.array([i // TOPICS % QUEUES for i in range(n)], pa.int32()),
            "tags": pa.DictionaryArray.from_arrays(
                pa.array([i % len(_TAGS) for i in range(n)], pa.int32()), pa.array(_TAGS)
            ),
            "keys": pc.binary_join_element_wise("k-", pc.cast(idx, pa.string()), ""),
        }
    )


def _open(path: Path, opts: BenchOptions) -> rocketstore.MessageStore:
    """A store with RocketMQ's defaults except smaller files and index (bounded disk use)."""
    return rocketstore.MessageStore(
        path,
        mapped_file_size_commit_log=opts.file_size,
        mapped_file_size_consume_queue=65_536 * 20,
        max_hash_slot_num=1_000_000,
        max_index_num=4_000_000,
    )


@contextmanager
def _fresh_dir(base: Path, name: str) -> Iterator[Path]:
    path = base / name
    shutil.rmtree(path, ignore_errors=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _background_ticks() -> int:
    """CPU ticks used so far by this process's threads other than the calling one (``/proc``;
    0 where it is missing)."""
    me = str(threading.get_native_id())
    total = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for tid in tasks:
        if tid == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as fh:
                rest = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += int(rest[11]) + int(rest[12])
    return total


def _wait_background_idle(limit_s: float = 30.0) -> float:
    """Seconds until the store's background threads are idle (no CPU tick for 0.2 s).

    After a large ``put_batch`` the store keeps working for a while: the allocate thread
    prepares the next commit log file (faulting in and zeroing a whole file), the flush
    threads write dirty pages back. The read figures wait for that first, so their CPU time
    per message is the reads' own.
    """
    t0 = time.perf_counter()
    last = _background_ticks()
    quiet_since = time.perf_counter()
    while time.perf_counter() - t0 < limit_s:
        time.sleep(0.05)
        now = _background_ticks()
        if now != last:
            last, quiet_since = now, time.perf_counter()
        elif time.perf_counter() - quiet_since >= 0.2:
            break
    return time.perf_counter() - t0


def _read_log(files: Sequence[str], file_size: int, start: int, end: int) -> bytes:
    """Commit log bytes ``[start, end)`` (absolute offsets), across files."""
    by_start = {int(Path(f).name): f for f in files if Path(f).name.isdigit()}
    out = bytearray()
    pos = start
    while pos < end:
        base = pos - pos % file_size
        take = min(end, base + file_size) - pos
        with open(by_start[base], "rb") as fh:
            fh.seek(pos - base)
            out += fh.read(take)
        pos += take
    return bytes(out)


# --------------------------------------------------------------------------------------
# rocketstore figures
# --------------------------------------------------------------------------------------


@dataclass
class _Data:
    size: int
    table: Any
    n: int
    body_bytes: int
    batches: list[Any]
    batch_body_bytes: list[int]
    encoded: list[bytes] = field(default_factory=list)  # commit log records per batch


def _put_batch(store_dir: Path, data: _Data, opts: BenchOptions) -> tuple[Figure, Any]:
    """put_batch of the whole table; returns the figure and the open store (with the data)."""
    store = _open(store_dir, opts)
    store.put("BenchWarmup", b"x")  # creates the first file outside the measurement
    # CPU is the whole process's from the first call until dispatch has caught up, so the
    # background threads' work between calls (pre-fault, dispatch, flush) is counted too; the
    # results are read only after that window.
    seconds = 0.0
    results: list[Any] = []
    c_start = time.process_time()
    for part in data.batches:
        t0 = time.perf_counter()
        results.append(store.put_batch(part))
        seconds += time.perf_counter() - t0
    catch_up = _wait_dispatched(store)
    cpu = time.process_time() - c_start
    ranges: list[tuple[int, int]] = []
    failed = 0
    for part, res in zip(data.batches, results, strict=True):
        offs = res.column("commitlog_offset")
        wrote = res.column("wrote_bytes")
        last = part.num_rows - 1
        ranges.append((offs[0].as_py(), offs[last].as_py() + wrote[last].as_py()))
        failed += part.num_rows - res.column("status").to_pylist().count("PUT_OK")
    fig = Figure("put_batch", data.size, data.n, seconds, data.body_bytes)
    fig.extra["batch_rows"] = opts.batch
    if failed:
        fig.note = f"{failed} puts failed"
    fig.extra["dispatch_catch_up_s"] = round(catch_up, 4)
    fig.cpu_seconds = cpu
    files = store.commitlog_files()
    fsize = int(store.config["mapped_file_size_commit_log"])
    data.encoded = [_read_log(files, fsize, a, b) for a, b in ranges]
    fig.extra["record_bytes"] = sum(len(e) for e in data.encoded)
    return fig, store


def _put_each(store_dir: Path, data: _Data, opts: BenchOptions) -> Figure:
    n = data.n
    topics = data.table.column("topic").to_pylist()
    bodies = data.table.column("body").to_pylist()
    qids = data.table.column("queue_id").to_pylist()
    tags = data.table.column("tags").to_pylist()
    keys = data.table.column("keys").to_pylist()
    done = 0
    with _open(store_dir, opts) as store:
        store.put("BenchWarmup", b"x")
        put = store.put
        deadline = time.perf_counter() + opts.seconds
        c0 = time.process_time()
        t0 = time.perf_counter()
        while done < n:
            end = min(n, done + 1024)
            for i in range(done, end):
                put(topics[i], bodies[i], queue_id=qids[i], tags=tags[i], keys=keys[i])
            done = end
            if time.perf_counter() > deadline:
                break
        seconds = time.perf_counter() - t0
        cpu = time.process_time() - c0
    fig = Figure("put", data.size, done, seconds, done * data.size)
    fig.cpu_seconds = cpu
    return fig


def _get_message(store: Any, data: _Data, opts: BenchOptions) -> Figure:
    fig = Figure("get_message", data.size)
    if not _has(store, "get_message"):
        fig.skipped = "the installed binding has no MessageStore.get_message yet"
        return fig
    deadline = time.perf_counter() + opts.seconds
    got = 0
    nbytes = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    for t in range(TOPICS):
        for q in range(QUEUES):
            off = 0
            while True:
                r = store.get_message(f"BenchTopic{t}", q, off, 32)
                msgs = r.messages
                if not msgs:
                    break
                for m in msgs:
                    nbytes += len(m.body)
                got += len(msgs)
                off = r.next_begin_offset
                if time.perf_counter() > deadline:
                    break
            if time.perf_counter() > deadline:
                break
        if time.perf_counter() > deadline:
            break
    fig.seconds = time.perf_counter() - t0
    fig.cpu_seconds = time.process_time() - c0
    fig.messages = got
    fig.body_bytes = nbytes
    fig.extra["batch"] = 32
    return fig


def _read_arrow(store: Any, data: _Data, opts: BenchOptions) -> Figure:
    """The whole commit log as Arrow batches (``read_arrow``), body bytes summed per batch."""
    fig = Figure("read_arrow", data.size)
    if not _has(store, "read_arrow"):
        fig.skipped = "the installed binding has no MessageStore.read_arrow yet"
        return fig
    got = 0
    nbytes = 0
    off = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    while True:
        batch, off = store.read_arrow(off, max_messages=65_536)
        if batch.num_rows == 0:
            break
        got += batch.num_rows
        body = batch.column("body")
        nbytes += body.buffers()[2].size if body.buffers()[2] is not None else 0
    fig.seconds = time.perf_counter() - t0
    fig.cpu_seconds = time.process_time() - c0
    fig.messages = got
    fig.body_bytes = nbytes
    fig.extra["batch"] = 65_536
    return fig


def _get_message_arrow(store: Any, data: _Data, opts: BenchOptions) -> Figure:
    """Every queue through its consume queue as Arrow batches (``get_message_arrow``)."""
    fig = Figure("get_message_arrow", data.size)
    if not _has(store, "get_message_arrow"):
        fig.skipped = "the installed binding has no MessageStore.get_message_arrow yet"
        return fig
    got = 0
    nbytes = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    for t in range(TOPICS):
        for q in range(QUEUES):
            off = 0
            while True:
                batch, off = store.get_message_arrow(f"BenchTopic{t}", q, off, 65_536)
                if batch.num_rows == 0:
                    break
                got += batch.num_rows
                body = batch.column("body")
                nbytes += body.buffers()[2].size if body.buffers()[2] is not None else 0
    fig.seconds = time.perf_counter() - t0
    fig.cpu_seconds = time.process_time() - c0
    fig.messages = got
    fig.body_bytes = nbytes
    fig.extra["batch"] = 65_536
    return fig


def _pull_wake(store: Any, data: _Data, opts: BenchOptions) -> Figure:
    fig = Figure("pull_wake", data.size)
    if not _has(store, "pull"):
        fig.skipped = "the installed binding has no MessageStore.pull yet"
        return fig
    rounds = 10 if opts.smoke else 200
    topic = "BenchPull"
    body = b"p" * data.size
    has_stats = _has(store, "stats")
    lat: list[float] = []
    box: dict[str, float] = {}
    errors: list[BaseException] = []

    def puller(offset: int, ready: threading.Event) -> None:
        try:
            ready.set()
            r = store.pull(topic, 0, offset, 1, timeout_ms=5000)
            box["t1"] = time.perf_counter()
            box["n"] = len(r.messages)
        except BaseException as e:  # reported after the join
            errors.append(e)

    store.put(topic, body)  # the queue exists (is dispatched) before the first pull
    t_wait = time.perf_counter() + 10
    while store.max_offset_in_queue(topic, 0) < 1 and time.perf_counter() < t_wait:
        time.sleep(0.001)
    offset = 1
    t_start = time.perf_counter()
    for _ in range(rounds):
        ready = threading.Event()
        box.clear()
        th = threading.Thread(target=puller, args=(offset, ready), daemon=True)
        th.start()
        ready.wait()
        # Make sure the pull is parked before the put (else it finds the message directly).
        wait_until = time.perf_counter() + 0.05
        if has_stats:
            while store.stats().get("waiting_pulls", 0) == 0 and time.perf_counter() < wait_until:
                time.sleep(0.0002)
        else:
            time.sleep(0.005)
        t0 = time.perf_counter()
        store.put(topic, body)
        th.join(10)
        if errors or "t1" not in box or not box.get("n"):
            break
        lat.append(box["t1"] - t0)
        offset += 1
        if time.perf_counter() - t_start > max(opts.seconds, 0.5) * 2:
            break
    if errors:
        fig.skipped = f"pull failed: {errors[0]!r}"
        return fig
    if not lat:
        fig.skipped = "no pull returned a message"
        return fig
    lat.sort()
    fig.messages = len(lat)
    fig.seconds = sum(lat)
    fig.body_bytes = len(lat) * data.size
    fig.extra["p50_us"] = round(lat[len(lat) // 2] * 1e6, 1)
    fig.extra["p99_us"] = round(lat[min(len(lat) - 1, len(lat) * 99 // 100)] * 1e6, 1)
    fig.extra["max_us"] = round(lat[-1] * 1e6, 1)
    fig.note = (
        f"wake latency p50 {fig.extra['p50_us']:.0f} us, p99 {fig.extra['p99_us']:.0f} us "
        f"({len(lat)} pulls)"
    )
    return fig


def _query(store: Any, data: _Data, opts: BenchOptions) -> Figure:
    fig = Figure("query_message", data.size)
    if not _has(store, "query_message"):
        fig.skipped = "the installed binding has no MessageStore.query_message yet"
        return fig
    rng = random.Random(5)
    ids = [rng.randrange(data.n) for _ in range(min(data.n, 200_000))]
    found = 0
    done = 0
    deadline = time.perf_counter() + opts.seconds
    c0 = time.process_time()
    t0 = time.perf_counter()
    query = store.query_message
    for i in ids:
        found += len(query(f"BenchTopic{i % TOPICS}", f"k-{i}", max_num=4))
        done += 1
        if done % 256 == 0 and time.perf_counter() > deadline:
            break
    fig.seconds = time.perf_counter() - t0
    fig.cpu_seconds = time.process_time() - c0
    fig.messages = done
    fig.body_bytes = found * data.size
    if found != done:
        fig.note = f"{done - found} of {done} keys not found"
    return fig


# Keys per ``query_messages`` call, ids per ``SELECT ... IN`` of ``sqlite_lookup_batch``.
KEY_BATCH = 256


def _query_batch(store: Any, data: _Data, opts: BenchOptions) -> Figure:
    fig = Figure("query_messages", data.size)
    if not _has(store, "query_messages"):
        fig.skipped = "the installed binding has no MessageStore.query_messages yet"
        return fig
    rng = random.Random(5)
    ids = [rng.randrange(data.n) for _ in range(min(data.n, 200_000))]
    # The same random keys, grouped by topic (a batch asks one topic) in calls of KEY_BATCH;
    # built before the clock starts, as the single lookups' keys are formatted inside theirs.
    calls: list[tuple[str, list[str]]] = []
    for t in range(TOPICS):
        keys = [f"k-{i}" for i in ids if i % TOPICS == t]
        calls.extend(
            (f"BenchTopic{t}", keys[j : j + KEY_BATCH]) for j in range(0, len(keys), KEY_BATCH)
        )
    rng.shuffle(calls)
    found = 0
    done = 0
    deadline = time.perf_counter() + opts.seconds
    c0 = time.process_time()
    t0 = time.perf_counter()
    query = store.query_messages
    for topic, keys in calls:
        found += sum(map(len, query(topic, keys, max_num=4)))
        done += len(keys)
        if time.perf_counter() > deadline:
            break
    fig.seconds = time.perf_counter() - t0
    fig.cpu_seconds = time.process_time() - c0
    fig.messages = done
    fig.body_bytes = found * data.size
    fig.extra["batch"] = KEY_BATCH
    if found != done:
        fig.note = f"{done - found} of {done} keys not found"
    return fig


def _recovery(store_dir: Path, data: _Data, opts: BenchOptions) -> Figure:
    fig = Figure("recovery", data.size)
    for f in ("checkpoint",):
        (store_dir / f).unlink(missing_ok=True)
    (store_dir / "abort").write_bytes(b"")
    shutil.rmtree(store_dir / "consumequeue", ignore_errors=True)
    shutil.rmtree(store_dir / "index", ignore_errors=True)
    c0 = time.process_time()
    t0 = time.perf_counter()
    with _open(store_dir, opts) as store:
        fig.seconds = time.perf_counter() - t0
        fig.cpu_seconds = time.process_time() - c0
        rep = store.recovery_report
        size = store.max_commitlog_offset() - store.min_commitlog_offset()
    fig.messages = int(rep.get("records", 0))
    fig.body_bytes = fig.messages * data.size
    fig.extra["commitlog_bytes"] = size
    fig.extra["abnormal"] = bool(rep.get("abnormal"))
    if fig.seconds > 0 and size:
        fig.extra["gb_per_s"] = round(size / fig.seconds / 1e9, 3)
        fig.extra["s_per_gb"] = round(fig.seconds / (size / 1e9), 3)
        fig.note = f"{size / 1e6:.0f} MB of commit log: {fig.extra['s_per_gb']:.2f} s per GB"
    return fig


# --------------------------------------------------------------------------------------
# baselines
# --------------------------------------------------------------------------------------


def _file_write(path: Path, data: _Data) -> Figure:
    with open(path, "wb", buffering=0) as fh:
        c0 = time.process_time()
        t0 = time.perf_counter()
        for chunk in data.encoded:
            fh.write(chunk)
        seconds = time.perf_counter() - t0
        cpu = time.process_time() - c0
    fig = Figure("file_write", data.size, data.n, seconds, data.body_bytes)
    fig.cpu_seconds = cpu
    fig.note = "I/O floor: the same records, write() per batch, no fsync"
    return fig


def _mmap_memcpy(path: Path, data: _Data) -> Figure:
    import mmap

    total = sum(len(c) for c in data.encoded)
    with open(path, "w+b") as fh:
        fh.truncate(max(total, 1))
        with mmap.mmap(fh.fileno(), max(total, 1)) as mm:
            zero = bytes(1 << 20)
            for pos in range(0, total, len(zero)):  # pre-fault every page (untimed)
                n = min(len(zero), total - pos)
                mm[pos : pos + n] = zero[:n]
            pos = 0
            c0 = time.process_time()
            t0 = time.perf_counter()
            for chunk in data.encoded:
                mm[pos : pos + len(chunk)] = chunk
                pos += len(chunk)
            seconds = time.perf_counter() - t0
            cpu = time.process_time() - c0
    fig = Figure("mmap_memcpy", data.size, data.n, seconds, data.body_bytes)
    fig.cpu_seconds = cpu
    fig.note = "physical ceiling: the same records memcpy'd into a pre-faulted mmap"
    return fig


def _file_read(files: Sequence[str], data: _Data) -> Figure:
    size = sum(os.path.getsize(f) for f in files)
    buf = bytearray(8 << 20)
    view = memoryview(buf)
    c0 = time.process_time()
    t0 = time.perf_counter()
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while fh.readinto(view):
                pass
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0
    fig = Figure("file_read", data.size, data.n, seconds, data.body_bytes)
    fig.cpu_seconds = cpu
    fig.extra["bytes"] = size
    fig.note = "scan floor: readinto() of the commit log files (page cache warm)"
    return fig


def _sqlite_open(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS q (id INTEGER PRIMARY KEY, topic TEXT, body BLOB)")
    return db


def _sqlite(base: Path, data: _Data, opts: BenchOptions) -> list[Figure]:
    figs: list[Figure] = []
    topics = data.table.column("topic").to_pylist()
    bodies = data.table.column("body").to_pylist()
    rows = list(zip(topics, bodies, strict=True))
    with _fresh_dir(base, "sqlite") as d:
        d.mkdir(parents=True)
        # executemany per batch, one transaction each
        db = _sqlite_open(d / "queue.db")
        seconds = 0.0
        cpu = 0.0
        start = 0
        for part in data.batches:
            chunk = rows[start : start + part.num_rows]
            start += part.num_rows
            c0 = time.process_time()
            t0 = time.perf_counter()
            db.execute("BEGIN")
            db.executemany("INSERT INTO q (topic, body) VALUES (?, ?)", chunk)
            db.execute("COMMIT")
            seconds += time.perf_counter() - t0
            cpu += time.process_time() - c0
        figs.append(Figure("sqlite_executemany", data.size, data.n, seconds, data.body_bytes))
        figs[-1].cpu_seconds = cpu
        figs[-1].note = "executemany per batch in one transaction (WAL, synchronous=NORMAL)"

        # reads in batches of 32 by id
        deadline = time.perf_counter() + opts.seconds
        got = 0
        nbytes = 0
        last = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        while True:
            batch = db.execute(
                "SELECT id, topic, body FROM q WHERE id > ? ORDER BY id LIMIT 32", (last,)
            ).fetchall()
            if not batch:
                break
            for row in batch:
                nbytes += len(row[2])
            got += len(batch)
            last = batch[-1][0]
            if got % 4096 < 32 and time.perf_counter() > deadline:
                break
        seconds = time.perf_counter() - t0
        figs.append(Figure("sqlite_read", data.size, got, seconds, nbytes))
        figs[-1].cpu_seconds = time.process_time() - c0
        figs[-1].note = "SELECT ... WHERE id > ? ORDER BY id LIMIT 32"

        # lookups by primary key
        rng = random.Random(5)
        ids = [rng.randrange(1, data.n + 1) for _ in range(min(data.n, 200_000))]
        done = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        deadline = t0 + opts.seconds
        for i in ids:
            db.execute("SELECT topic, body FROM q WHERE id = ?", (i,)).fetchone()
            done += 1
            if done % 256 == 0 and time.perf_counter() > deadline:
                break
        seconds = time.perf_counter() - t0
        figs.append(Figure("sqlite_lookup", data.size, done, seconds, done * data.size))
        figs[-1].cpu_seconds = time.process_time() - c0
        figs[-1].note = "SELECT ... WHERE id = ? (primary key)"

        # the same ids, KEY_BATCH per SELECT ... WHERE id IN (...)
        done = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        deadline = t0 + opts.seconds
        for j in range(0, len(ids), KEY_BATCH):
            part = ids[j : j + KEY_BATCH]
            sql = f"SELECT topic, body FROM q WHERE id IN ({','.join('?' * len(part))})"
            done += len(db.execute(sql, part).fetchall())
            if time.perf_counter() > deadline:
                break
        seconds = time.perf_counter() - t0
        figs.append(Figure("sqlite_lookup_batch", data.size, done, seconds, done * data.size))
        figs[-1].cpu_seconds = time.process_time() - c0
        figs[-1].note = f"SELECT ... WHERE id IN ({KEY_BATCH} ids)"
        db.close()

        # one autocommitted INSERT per message (what a per-message put compares with)
        db = _sqlite_open(d / "each.db")
        done = 0
        deadline = time.perf_counter() + opts.seconds
        c0 = time.process_time()
        t0 = time.perf_counter()
        ins = "INSERT INTO q (topic, body) VALUES (?, ?)"
        while done < data.n:
            end = min(data.n, done + 256)
            for i in range(done, end):
                db.execute(ins, rows[i])
            done = end
            if time.perf_counter() > deadline:
                break
        seconds = time.perf_counter() - t0
        figs.append(Figure("sqlite_insert", data.size, done, seconds, done * data.size))
        figs[-1].cpu_seconds = time.process_time() - c0
        figs[-1].note = "one autocommitted INSERT per message"
        db.close()
    return figs


# --------------------------------------------------------------------------------------
# Spark
# --------------------------------------------------------------------------------------


def spark_input_table(t: Any) -> Any:
    """The columns of a bench table that the Spark benchmarks write, with the dictionary
    columns as plain strings (what a DataFrame holds)."""
    import pyarrow as pa

    return pa.table(
        {
            "topic": t.column("topic").cast(pa.string()),
            "body": t.column("body"),
            "queue_id": t.column("queue_id"),
            "tags": t.column("tags").cast(pa.string()),
            "keys": t.column("keys"),
        }
    )


def spark_median_line(
    got: dict[str, list[tuple[float, float]]], name: str, size: int, n: int, width: int
) -> str:
    """The ``MEDIAN`` line of one variant of a Spark benchmark: msg/s and CPU ns per message
    from the median wall and CPU seconds of ``got[name]`` (``(wall, cpu)`` per round, ``n``
    messages of ``size`` bytes each), with the time over Parquet's when a ``parquet`` variant
    ran."""
    import statistics

    pw = statistics.median(w for w, _ in got["parquet"]) if got.get("parquet") else 0.0
    w = statistics.median(x for x, _ in got[name])
    c = statistics.median(x for _, x in got[name])
    ratio = f"time/parquet {w / pw:5.2f}" if pw else ""
    return (
        f"MEDIAN {size:5d} B {name:{width}s} {n / w:12,.0f} msg/s "
        f"{c * 1e9 / n:8,.0f} CPU ns/msg  {ratio}"
    )


def bench_spark_session(app_name: str) -> Any:
    """The local[2] Spark session the Spark benchmarks run in (Python workers on this
    interpreter, Arrow transfer on, no UI); the caller stops it."""
    from pyspark.sql import SparkSession

    # The Python workers must import rocketstore: run them with this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from rocketstore.spark._jvm import jvm_reader_conf

    builder = SparkSession.builder
    for key, value in jvm_reader_conf().items():  # the JVM reader, when it was built
        builder = builder.config(key, value)
    spark = (
        builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _spark_read_variants(spark: Any, p: Path, data: _Data, jvm_loaded: bool) -> list[Figure]:
    """The Python reader's reads of the store root ``p`` in the same session as the JVM
    reader's (``spark.rocketstore.jvmReader=false``): every column (the Python data source API
    has no column pruning), and the pruning ``.schema("body binary")``."""
    from pyspark.sql import functions as F

    from rocketstore.spark._jvm import ENABLED_CONF

    figs: list[Figure] = []
    variants: list[tuple[str, str, Callable[[], Any]]] = [
        (
            "spark_read_rocketstore_body",
            '.schema("body binary"), Python reader',
            lambda: spark.read.format("rocketstore").schema("body binary").load(str(p)),
        ),
    ]
    if jvm_loaded:
        variants.insert(
            0,
            (
                "spark_read_rocketstore_py",
                "Python reader (spark.rocketstore.jvmReader=false)",
                lambda: spark.read.format("rocketstore").load(str(p)),
            ),
        )
    spark.conf.set(ENABLED_CONF, "false")
    try:
        for fig_name, what, read in variants:
            read().agg(F.sum(F.length("body"))).collect()  # warm-up
            c0, t0 = tree_cpu_seconds(), time.perf_counter()
            total = read().agg(F.sum(F.length("body"))).collect()
            seconds = time.perf_counter() - t0
            fig = Figure(fig_name, data.size, data.n, seconds, data.body_bytes)
            fig.cpu_seconds = tree_cpu_seconds() - c0
            fig.note = f"{what}: sum(length(body)) = {total[0][0]}"
            figs.append(fig)
    finally:
        spark.conf.set(ENABLED_CONF, "true")
    return figs


SINK_FILES = 10  # Parquet files of the sink's source
SINK_PER_TRIGGER = 2  # files per micro-batch: five micro-batches
SINK_STORES = 2


def _spark_sink(spark: Any, base: Path, df: Any, data: _Data) -> list[Figure]:
    """The streaming sink beside the batch writer, both from the same Parquet files.

    ``df`` is written once as :data:`SINK_FILES` Parquet files; ``spark_batch_files`` is
    ``spark.read.parquet(src).write.format("rocketstore")`` (the default path), ``spark_sink``
    is ``spark.readStream.parquet(src)`` with ``maxFilesPerTrigger`` :data:`SINK_PER_TRIGGER`
    into ``writeStream.format("rocketstore")`` with ``stores`` :data:`SINK_STORES` and
    ``trigger(availableNow=True)``: task records, commit records, flushes and cleanup included.
    One untimed warm-up each."""
    import shutil as _shutil

    src = base / "sink-src"
    df.repartition(SINK_FILES).write.mode("overwrite").parquet(str(src))
    schema = spark.read.parquet(str(src)).schema

    def batch(out: Path) -> None:
        spark.read.parquet(str(src)).write.format("rocketstore").mode("overwrite").save(str(out))

    def sink(out: Path) -> None:
        ckpt = Path(str(out) + "-ckpt")
        _shutil.rmtree(ckpt, ignore_errors=True)
        q = (
            spark.readStream.schema(schema)
            .option("maxFilesPerTrigger", SINK_PER_TRIGGER)
            .parquet(str(src))
            .writeStream.format("rocketstore")
            .option("checkpointLocation", str(ckpt))
            .option("stores", SINK_STORES)
            .trigger(availableNow=True)
            .start(str(out))
        )
        q.awaitTermination()
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))

    figs: list[Figure] = []
    notes = {
        "spark_batch_files": "spark.read.parquet(src).write.format('rocketstore'), default path",
        "spark_sink": (
            f"readStream.parquet(src), maxFilesPerTrigger {SINK_PER_TRIGGER} "
            f"({SINK_FILES // SINK_PER_TRIGGER} micro-batches) into writeStream, "
            f"stores {SINK_STORES}, availableNow"
        ),
    }
    try:
        for name, run_one in (("spark_batch_files", batch), ("spark_sink", sink)):
            try:
                with _fresh_dir(base, name) as p:
                    run_one(p)  # warm-up
            except Exception as e:
                figs.append(Figure(name, data.size, skipped=f"{type(e).__name__}: {e}"[:400]))
                continue
            with _fresh_dir(base, name) as p:
                c0, t0 = tree_cpu_seconds(), time.perf_counter()
                run_one(p)
                fig = Figure(name, data.size, data.n, time.perf_counter() - t0, data.body_bytes)
                fig.cpu_seconds = tree_cpu_seconds() - c0
                fig.note = notes[name] + f"; {SINK_FILES} Parquet files of the same rows"
                figs.append(fig)
                _shutil.rmtree(str(p) + "-ckpt", ignore_errors=True)
    finally:
        _shutil.rmtree(src, ignore_errors=True)
    return figs


def _spark(base: Path, data: _Data, opts: BenchOptions) -> list[Figure]:
    try:
        import pyspark.sql  # noqa: F401  (is Spark importable?)
    except ImportError as e:
        return [Figure("spark_parquet", data.size, skipped=f"pyspark not importable: {e}")]
    spark = bench_spark_session("rocketstore-bench")
    from rocketstore.spark._jvm import ENABLED_CONF, WRITER_CONF, jvm_reader_files

    jvm_loaded = jvm_reader_files() is not None
    try:
        import rocketstore.spark as rs_spark

        register: Callable[..., Any] | None = getattr(rs_spark, "register", None)
        if register is not None:
            register(spark)

        plain = spark_input_table(data.table)
        try:  # Spark 4 takes a pyarrow.Table directly
            df = spark.createDataFrame(plain)
        except (TypeError, ValueError):
            df = spark.createDataFrame(plain.to_pandas())
        df = df.repartition(2).cache()
        df.count()
        figs: list[Figure] = []
        writers: list[tuple[str, Callable[[Path], None]]] = [
            ("spark_parquet", lambda p: df.write.mode("overwrite").parquet(str(p))),
            (
                "spark_rocketstore",
                lambda p: (
                    df.write.format("rocketstore")
                    .mode("overwrite")
                    .option("mapped_file_size_commit_log", str(opts.file_size))
                    .save(str(p))
                ),
            ),
        ]
        if jvm_loaded:
            spark.conf.set(WRITER_CONF, "true")  # the default with the jar

            # The Python writer in the same session.
            def python_write(p: Path) -> None:
                spark.conf.set(WRITER_CONF, "false")
                try:
                    writers[1][1](p)
                finally:
                    spark.conf.set(WRITER_CONF, "true")

            writers.append(("spark_rocketstore_py", python_write))
        from pyspark.sql import functions as F

        readers: dict[str, tuple[str, Callable[[Path], Any]]] = {
            "spark_parquet": ("spark_read_parquet", lambda p: spark.read.parquet(str(p))),
            "spark_rocketstore": (
                "spark_read_rocketstore",
                lambda p: spark.read.format("rocketstore").load(str(p)),
            ),
        }
        for name, write in writers:
            # A first, untimed write warms up the JVM and the Python workers for this format.
            with _fresh_dir(base, name) as p:
                try:
                    write(p)
                except Exception as e:  # the data source may be missing in this build
                    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
                    why = f"{lines[0]} ... {lines[-1]}" if len(lines) > 1 else "".join(lines)
                    skipped = f"{type(e).__name__}: {why}"[:400]
                    figs.append(Figure(name, data.size, skipped=skipped))
                    continue
            with _fresh_dir(base, name) as p:
                c0, t0 = tree_cpu_seconds(), time.perf_counter()
                write(p)
                seconds = time.perf_counter() - t0
                fig = Figure(name, data.size, data.n, seconds, data.body_bytes)
                fig.cpu_seconds = tree_cpu_seconds() - c0
                fig.note = (
                    "local[2], 2 partitions, cached DataFrame; after one warm-up write; "
                    "CPU of driver, JVM and Python workers"
                )
                if name == "spark_rocketstore":
                    fig.note += " (JVM writer)" if jvm_loaded else " (Python writer: no jar)"
                elif name == "spark_rocketstore_py":
                    fig.note += f" (Python writer, {WRITER_CONF}=false)"
                figs.append(fig)
                if name not in readers:
                    continue
                read_name, read = readers[name]
                if name == "spark_rocketstore":
                    spark.conf.set(ENABLED_CONF, "true")
                total = read(p).agg(F.sum(F.length("body"))).collect()  # warm-up
                c0, t0 = tree_cpu_seconds(), time.perf_counter()
                total = read(p).agg(F.sum(F.length("body"))).collect()
                seconds = time.perf_counter() - t0
                fig = Figure(read_name, data.size, data.n, seconds, data.body_bytes)
                fig.cpu_seconds = tree_cpu_seconds() - c0
                fig.note = f"sum(length(body)) = {total[0][0]}, after one warm-up read"
                if name == "spark_rocketstore":
                    fig.note += " (JVM reader)" if jvm_loaded else " (Python reader: no jar)"
                figs.append(fig)
                if name == "spark_rocketstore":
                    figs.extend(_spark_read_variants(spark, p, data, jvm_loaded))
        figs.extend(_spark_sink(spark, base, df, data))
        df.unpersist()
        return figs
    finally:
        spark.stop()


# --------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    """Cores, memory, kernel and load of this machine (for the report)."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "rocketstore": rocketstore.__version__,
        # `make bench` builds with the environment it runs in: the release profile of
        # Cargo.toml (thin LTO) unless CARGO_PROFILE_RELEASE_LTO overrides it.
        "release_lto": os.environ.get("CARGO_PROFILE_RELEASE_LTO", "thin"),
    }
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    info["mem_gb"] = round(int(line.split()[1]) / 1e6, 1)
                    break
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def _link(figs: list[Figure]) -> None:
    by = {(f.name, f.size): f for f in figs if not f.skipped}
    for f in figs:
        base_name = BASELINE_OF.get(f.name)
        if base_name is None or f.skipped:
            continue
        f.baseline = base_name
        b = by.get((base_name, f.size))
        if b is not None and b.msgs_per_s > 0:
            f.ratio = f.msgs_per_s / b.msgs_per_s
        if f.name == "put_batch":
            for bound in BOUNDS:
                bb = by.get((bound, f.size))
                if bb is not None and bb.msgs_per_s > 0:
                    f.extra[f"of_{bound}"] = round(f.msgs_per_s / bb.msgs_per_s, 3)


def _fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:7.2f} M/s"
    if x >= 1e3:
        return f"{x / 1e3:7.1f} k/s"
    return f"{x:7.0f}  /s"


def format_table(figs: Sequence[Figure]) -> str:
    """The result table as printed."""
    lines = [
        f"{'size':>5}  {'figure':<19} {'msgs/s':>11} {'MB/s':>9} {'CPU ns/msg':>10}  {'ratio':>7} "
        f"{'to baseline':<19} note",
    ]
    for f in figs:
        if f.skipped:
            lines.append(
                f"{f.size:>5}  {f.name:<19} {'skipped':>11} {'':>9} {'':>10}  {'':>7} {'':<19} "
                f"{f.skipped}"
            )
            continue
        ratio = f"{f.ratio:6.2f}x" if f.ratio is not None else ""
        note = f.note
        if f.name == "put_batch" and "of_file_write" in f.extra:
            note = (
                f"{f.extra['of_file_write']:.2f}x file write, "
                f"{f.extra.get('of_mmap_memcpy', 0):.2f}x mmap ceiling; "
                f"dispatch done {f.extra.get('dispatch_catch_up_s', 0):.2f} s later"
            )
        rate = "" if f.name == "pull_wake" else _fmt_rate(f.msgs_per_s)
        mb = "" if f.name == "pull_wake" else f"{f.mb_per_s:9.1f}"
        cpu = f"{f.cpu_ns_per_msg:10.0f}" if f.cpu_seconds > 0 and f.messages else ""
        base = f.baseline or ""
        lines.append(
            f"{f.size:>5}  {f.name:<19} {rate:>11} {mb:>9} {cpu:>10}  {ratio:>7} {base:<19} {note}"
        )
    return "\n".join(lines)


def run(opts: BenchOptions, out: Any = None) -> list[Figure]:
    """Runs every figure for every size; prints the table; writes ``opts.json_path``."""
    stream = out if out is not None else sys.stdout

    def say(msg: str) -> None:
        if not opts.quiet:
            print(msg, file=sys.stderr, flush=True)

    started = time.time()
    load_start = [round(x, 2) for x in os.getloadavg()]
    scale: list[dict[str, Any]] = []
    parent = opts.dir or os.environ.get("ROCKETSTORE_BENCH_DIR") or None
    if parent:
        Path(parent).mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="rocketstore-bench-", dir=parent))
    figs: list[Figure] = []
    try:
        for size in opts.sizes:
            n = opts.messages_for(size)
            say(f"[{size} B] building {n:,} messages as an Arrow table ...")
            table = bench_table(n, size)
            batches = [table.slice(i, opts.batch) for i in range(0, n, opts.batch)]
            data = _Data(
                size=size,
                table=table,
                n=n,
                body_bytes=n * size,
                batches=batches,
                batch_body_bytes=[b.num_rows * size for b in batches],
            )
            here: list[Figure] = []
            with _fresh_dir(base, f"store-{size}") as store_dir:
                say(f"[{size} B] put_batch ...")
                fig, store = _put_batch(store_dir, data, opts)
                here.append(fig)
                try:
                    say(f"[{size} B] get_message, pull, query_message ...")
                    settle = _wait_background_idle(5.0 if opts.smoke else 30.0)
                    here.append(_get_message(store, data, opts))
                    here[-1].extra["background_settle_s"] = round(settle, 3)
                    here.append(_read_arrow(store, data, opts))
                    here.append(_get_message_arrow(store, data, opts))
                    here.append(_pull_wake(store, data, opts))
                    here.append(_query(store, data, opts))
                    here.append(_query_batch(store, data, opts))
                    files = store.commitlog_files()
                finally:
                    store.close()
                say(f"[{size} B] baselines: file write, mmap, file read ...")
                with _fresh_dir(base, "plain") as p:
                    p.mkdir(parents=True)
                    here.append(_file_write(p / "records", data))
                    here.append(_mmap_memcpy(p / "mapped", data))
                here.append(_file_read(files, data))
                say(f"[{size} B] recovery ...")
                here.append(_recovery(store_dir, data, opts))
            with _fresh_dir(base, f"each-{size}") as each_dir:
                say(f"[{size} B] put (one call per message) ...")
                here.append(_put_each(each_dir, data, opts))
            say(f"[{size} B] SQLite ...")
            here.extend(_sqlite(base, data, opts))
            data.encoded = []
            order = [
                "put",
                "sqlite_insert",
                "put_batch",
                "sqlite_executemany",
                "file_write",
                "mmap_memcpy",
                "get_message",
                "sqlite_read",
                "read_arrow",
                "get_message_arrow",
                "query_message",
                "sqlite_lookup",
                "query_messages",
                "sqlite_lookup_batch",
                "pull_wake",
                "recovery",
                "file_read",
                "spark_rocketstore",
                "spark_rocketstore_py",
                "spark_parquet",
                "spark_read_rocketstore",
                "spark_read_rocketstore_py",
                "spark_read_rocketstore_body",
                "spark_read_parquet",
                "spark_batch_files",
                "spark_sink",
            ]
            here.sort(key=lambda f: order.index(f.name) if f.name in order else len(order))
            figs.extend(here)
            del data, table, batches
        if opts.peers:
            from rocketstore._bench_peers import run_peers

            for size in opts.sizes:
                n = opts.peer_messages
                say(f"[{size} B] peers: building {n:,} messages ...")
                table = bench_table(n, size)
                figs.extend(
                    run_peers(
                        base,
                        table,
                        size,
                        batch=opts.batch,
                        lookups=opts.peer_lookups,
                        seconds=opts.peer_seconds,
                        say=say,
                    )
                )
                del table
        if opts.spark:
            size, n = opts.spark_size, opts.spark_messages
            say(f"[{size} B] Spark: {n:,} rows, Parquet vs rocketstore ...")
            table = bench_table(n, size)
            sdata = _Data(size, table, n, n * size, [], [])
            figs.extend(_spark(base, sdata, opts))
            del sdata, table
        if opts.remote:
            from rocketstore._bench_remote import run_remote

            figs.extend(run_remote(base, say, messages=opts.remote_messages))
        if opts.follow:
            from rocketstore._bench_follow import run_follow

            figs.extend(
                run_follow(
                    base,
                    say,
                    rounds=50 if opts.smoke else 2000,
                    seconds=opts.seconds,
                    tail=5000 if opts.smoke else 200_000,
                )
            )
        if opts.scale:
            from rocketstore._bench_scale import run_scale

            scale = run_scale(
                opts.scale_sizes,
                base / "scale",
                say,
                unit=opts.scale_unit,
                options=opts.scale_options,
                batch=opts.scale_batch,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    _link(figs)
    info = machine_info()
    print(
        f"rocketstore bench ({'smoke, ' if opts.smoke else ''}"
        f"{info.get('cpus')} CPUs, load {load_start} at the start, {info['loadavg']} at the "
        "end); MB/s = body bytes per second; "
        "ratio = msgs/s over the baseline's",
        file=stream,
    )
    print(format_table(figs), file=stream)
    from rocketstore import _bench_report as report

    if scale:
        print("\ncost growth with size (--scale):\n" + report.scale_table(scale), file=stream)

    doc: dict[str, Any] = {
        "started": started,
        "seconds": round(time.time() - started, 2),
        "commit": report.git_commit(),
        "machine": info,
        "loadavg_start": load_start,
        "options": asdict(opts),
        "results": [f.to_json() for f in figs],
        "scale": scale,
    }
    if opts.since is not None:
        doc["make_bench_seconds"] = round(time.time() - opts.since, 1)
    if opts.criterion:
        doc["criterion"] = [
            r
            for r in report.criterion_results(Path(opts.criterion))
            if opts.since is None or r["mtime"] >= opts.since
        ]
    if opts.criterion_summary and Path(opts.criterion_summary).exists():
        lines = Path(opts.criterion_summary).read_text().splitlines()
        doc["criterion_summary"] = [json.loads(x) for x in lines if x.strip()]
    if opts.json_path:
        with open(opts.json_path, "w") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
        print(f"wrote {opts.json_path}", file=stream)
    if opts.markdown:
        report.write_markdown(doc, Path(opts.markdown), Path(opts.plot) if opts.plot else None)
        print(f"wrote the tables of {opts.markdown}", file=stream)
    return figs
