"""Write-path probe: Python ``put_batch`` from Arrow, shaped like the Rust criterion CPU pass
(``benches/append.rs`` ``append_async/put_batch/<size> cpu``), so the two compare directly.

A fresh store (ASYNC_FLUSH, 128 MiB commit log files, populate on), then ``put_batch`` of one
pyarrow table of 4,096 rows (one topic, 8 queues, tag ``TagA``, no keys: the same messages as
the Rust pass) until about 768 MiB of records, then wait until everything is dispatched.
Prints msg/s (messages / that wall time) and whole-process CPU ns per message
(``time.process_time()``: every thread, i.e. the caller, dispatch, allocate and flush)::

    .venv/bin/python benches/put_probe.py 100 1024 4096

Then the store is closed (its final flush) and the line adds that time and the sum: the time
until the pass is durable.

``ROCKETSTORE_BENCH_DIR`` picks the directory for the store (default: the temp dir);
``ROCKETSTORE_BENCH_TRANSIENT=1`` enables the transient store pool, as for the Rust pass;
``ROCKETSTORE_BENCH_PASS_MIB`` sets the pass size (default 768);
``ROCKETSTORE_BENCH_WRITEBACK`` sets ``flush_commit_log_writeback_bytes`` (default: the
store's); ``ROCKETSTORE_BENCH_COMPRESSION=lz4`` (or ``zstd``, ``zlib``) compresses every body
(``put_batch(..., compression=..., compress_over=0)``; the bodies are a repeated 16-byte
pattern, so this shows the codec's cost per message, not a typical ratio).
"""

import os
import shutil
import sys
import tempfile
import time

import pyarrow as pa

import rocketstore

BATCH = 4096
PASS_BYTES = int(os.environ.get("ROCKETSTORE_BENCH_PASS_MIB", "768")) << 20
CONFIG = {
    "mapped_file_size_commit_log": 128 << 20,
    "mapped_file_size_consume_queue": 65_536 * 20,
    "max_hash_slot_num": 1_000_000,
    "max_index_num": 4_000_000,
    "populate_mapped_file": True,
    "transient_store_pool_enable": os.environ.get("ROCKETSTORE_BENCH_TRANSIENT") == "1",
}
COMPRESSION = os.environ.get("ROCKETSTORE_BENCH_COMPRESSION") or None
if "ROCKETSTORE_BENCH_WRITEBACK" in os.environ:
    CONFIG["flush_commit_log_writeback_bytes"] = int(os.environ["ROCKETSTORE_BENCH_WRITEBACK"])


def table(size: int) -> pa.Table:
    body = bytes(b"0123456789abcdef"[i % 16] for i in range(size))
    return pa.table(
        {
            "topic": pa.array(["BenchTopic"] * BATCH),
            "body": pa.array([body] * BATCH, pa.binary()),
            "queue_id": pa.array([i % 8 for i in range(BATCH)], pa.int32()),
            "tags": pa.array(["TagA"] * BATCH),
        }
    )


def one(size: int, base: str) -> None:
    path = os.path.join(base, f"rocketstore-put-probe-{size}")
    shutil.rmtree(path, ignore_errors=True)
    t = table(size)
    batches = max(1, PASS_BYTES // ((size + 180) * BATCH))
    with rocketstore.MessageStore(path, **CONFIG) as store:
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(batches):
            store.put_batch(t, compression=COMPRESSION, compress_over=0)
        while store.stats().get("dispatch_behind_bytes", 0) > 0:
            time.sleep(0.002)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    closed = time.perf_counter() - w0 - wall
    shutil.rmtree(path, ignore_errors=True)
    n = batches * BATCH
    codec = f" ({COMPRESSION})" if COMPRESSION else ""
    print(
        f"python put_batch {size} B{codec}: {n} msgs dispatched in {wall:.3f} s: "
        f"{n / wall / 1e6:.3f} M msg/s, {cpu / n * 1e9:.0f} ns CPU per message (whole process); "
        f"close {closed:.3f} s, durable in {wall + closed:.3f} s"
    )


def main() -> None:
    base = os.environ.get("ROCKETSTORE_BENCH_DIR", tempfile.gettempdir())
    for size in [int(a) for a in sys.argv[1:]] or [100, 1024, 4096]:
        one(size, base)


if __name__ == "__main__":
    main()
