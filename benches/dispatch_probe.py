"""Dispatch alone on the ``rocketstore bench`` ``put_batch`` shape: CPU ns per message.

Writes the Python bench row's messages once (``_bench.bench_table``: 4 topics x 8 queues,
dictionary-typed topic and tags, a distinct key per row; the bench's store options), closes the
store, then runs ``rebuild_indexes`` on it ``rounds`` times: each run deletes the consume queues
and the index and dispatches every record again on the calling thread (the decode, consume queue
and index code the ``rs-reput`` thread runs behind ``put_batch``), with no allocate, flush or
writer thread beside it. Prints the CPU of each run per message (the process's, which here is
the calling thread's), the part of it in user mode (our code: the kernel's page zeroing,
faults, file creation and the final msync are the rest) and the medians::

    .venv/bin/python benches/dispatch_probe.py 100 [rounds]

``ROCKETSTORE_BENCH_DIR`` picks the directory for the store (default: the temp dir); an
existing store of the same size there is reused (``PROBE_KEEP=1`` keeps it after the run), so
two builds can be alternated on the same bytes. The CRC check of the scan is turned off
(``check_crc_on_recover=False``) so the figure is the dispatch and the final flush.
"""

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import rocketstore
from rocketstore import _bench


def main() -> None:
    size = int(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    o = _bench.BenchOptions()
    n = o.messages_for(size)
    base = Path(os.environ.get("ROCKETSTORE_BENCH_DIR", tempfile.gettempdir()))
    path = base / f"rocketstore-dispatch-{size}"
    if not (path / "commitlog").is_dir():
        shutil.rmtree(path, ignore_errors=True)
        t = _bench.bench_table(n, size)
        with _bench._open(path, o) as store:
            for i in range(0, n, o.batch):
                store.put_batch(t.slice(i, o.batch))
    cfg = {
        "mapped_file_size_commit_log": o.file_size,
        "mapped_file_size_consume_queue": 65_536 * 20,
        "max_hash_slot_num": 1_000_000,
        "max_index_num": 4_000_000,
        "check_crc_on_recover": False,
    }
    per, user = [], []
    for _ in range(rounds):
        r0, c0, w0 = os.times(), time.process_time(), time.perf_counter()
        report = rocketstore.rebuild_indexes(path, **cfg)
        cpu, wall, r1 = time.process_time() - c0, time.perf_counter() - w0, os.times()
        records = int(report["records"])
        per.append(cpu * 1e9 / records)
        user.append((r1.user - r0.user) * 1e9 / records)
        print(
            f"  {records} records: {per[-1]:.0f} ns CPU ({user[-1]:.0f} user), {wall:.3f} s",
            flush=True,
        )
    print(
        f"dispatch (rebuild_indexes) {size} B: median {statistics.median(per):.0f} ns CPU per "
        f"message, {statistics.median(user):.0f} in user mode, over {rounds} runs "
        f"({', '.join(f'{p:.0f}/{u:.0f}' for p, u in zip(per, user, strict=True))})",
        flush=True,
    )
    if os.environ.get("PROBE_KEEP") != "1":
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
