"""Times one open of a `rocketstore bench`-shaped store (issue 12, recovery row).

    python benches/recovery_probe.py write SIZE N DIR [TOPICS QUEUES KEYS FILE_MIB]
    python benches/recovery_probe.py abnormal DIR          # as _bench._recovery, then open
    python benches/recovery_probe.py clean DIR             # open + close, then time an open

``write`` builds the store exactly as ``rocketstore bench`` does (``_bench.bench_table``: 4 topics
x 8 queues, a tag and a distinct key per message; ``_bench._open``: 256 MiB commit log files).
``abnormal`` removes the checkpoint, ``consumequeue/`` and ``index/`` and writes the abort file
(``_bench._recovery``), so the open walks, CRC-checks and re-dispatches the whole commit log.
``write`` with the four optional arguments changes the shape: ``TOPICS`` topics (``BenchTopic{i %
TOPICS}``), ``QUEUES`` queues per topic, ``KEYS`` distinct keys (``k-{i % KEYS}``; 0 = one per
message) and ``FILE_MIB`` MiB commit log files; ``1 8 4096 128`` is criterion's
``recovery/abnormal_rebuild`` store (one topic, 8 queues, 4,096 keys, 128 MiB files). The file
size is read back from the store's first file when it is opened. ``clean`` times a reopen after a
clean close. One line per open: wall, whole-process CPU and the
opening thread's CPU (``time.thread_time``), each also per GB of commit log.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

from rocketstore import _bench


def shaped_table(n: int, size: int, topics: int, queues: int, keys: int) -> Any:
    """``_bench.bench_table`` with the topic, queue and key columns of another shape."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = _bench.bench_table(n, size)
    key_ids = pa.array([i % keys if keys else i for i in range(n)], pa.int64())
    return pa.table(
        {
            "topic": pa.array([f"BenchTopic{i % topics}" for i in range(n)], pa.string()),
            "body": t.column("body"),
            "queue_id": pa.array([i // topics % queues for i in range(n)], pa.int32()),
            "tags": t.column("tags"),
            "keys": pc.binary_join_element_wise("k-", pc.cast(key_ids, pa.string()), ""),
        }
    )


def main() -> None:
    mode = sys.argv[1]
    opts = _bench.BenchOptions()
    if mode == "write":
        size, n, d = int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
        shutil.rmtree(d, ignore_errors=True)
        if len(sys.argv) > 5:
            topics, queues, keys, mib = (int(a) for a in sys.argv[5:9])
            table = shaped_table(n, size, topics, queues, keys)
            opts.file_size = mib * 1024 * 1024
        else:
            table = _bench.bench_table(n, size)
        with _bench._open(d, opts) as store:
            for b in table.to_batches(opts.batch):
                store.put_batch(b)
            _bench._wait_dispatched(store)
        print(f"wrote {n} x {size} B to {d}")
        return
    d = Path(sys.argv[2])
    opts.file_size = min(p.stat().st_size for p in (d / "commitlog").iterdir())
    if mode == "abnormal":
        (d / "checkpoint").unlink(missing_ok=True)
        (d / "abort").write_bytes(b"")
        shutil.rmtree(d / "consumequeue", ignore_errors=True)
        shutil.rmtree(d / "index", ignore_errors=True)
    elif mode == "clean":
        _bench._open(d, opts).close()
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    c0, o0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
    store = _bench._open(d, opts)
    wall = time.perf_counter() - t0
    cpu, opener = time.process_time() - c0, time.thread_time() - o0
    try:
        gb = (store.max_commitlog_offset() - store.min_commitlog_offset()) / 1e9
        rep = store.recovery_report
    finally:
        store.close()
    print(
        f"{mode} {gb * 1e3:.0f} MB records={rep.get('records')} abnormal={rep.get('abnormal')}: "
        f"wall {wall:.3f} s ({wall / gb:.2f} s/GB), CPU {cpu:.3f} s ({cpu / gb:.2f} s/GB), "
        f"opening thread {opener:.3f} s ({opener / gb:.2f} s/GB)"
    )


if __name__ == "__main__":
    main()
