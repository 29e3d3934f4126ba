"""Bulk load until durable: ``put_batch`` of the ``rocketstore bench`` table into a fresh store
(ASYNC_FLUSH, 1 GiB commit log files), wait until every message is dispatched, then ``close()``
(the final flush). Prints the three wall times, their sum (the time until the whole load is
readable through the queues and durable), msg/s over that sum and whole-process CPU ns per
message::

    .venv/bin/python benches/load_close_probe.py 1024 250000
    .venv/bin/python benches/load_close_probe.py 1024 250000 flush_commit_log_writeback_bytes=0

Extra ``name=value`` arguments are store configuration fields (integers or true/false).
``ROCKETSTORE_BENCH_DIR`` picks the directory (default: the temp dir).
"""

import os
import shutil
import sys
import tempfile
import time

import rocketstore
from rocketstore._bench import bench_table


def _value(text: str) -> object:
    if text in ("true", "false"):
        return text == "true"
    return int(text)


def main() -> None:
    size, n = int(sys.argv[1]), int(sys.argv[2])
    config = {k: _value(v) for k, v in (a.split("=", 1) for a in sys.argv[3:])}
    table = bench_table(n, size)
    root = os.environ.get("ROCKETSTORE_BENCH_DIR", tempfile.gettempdir())
    path = os.path.join(root, f"rocketstore-load-close-{os.getpid()}")
    shutil.rmtree(path, ignore_errors=True)
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        store = rocketstore.MessageStore(path, mapped_file_size_commit_log=1 << 30, **config)
        for i in range(0, n, 4096):
            store.put_batch(table.slice(i, 4096))
        t1 = time.perf_counter()
        while store.stats()["dispatch_behind_bytes"] > 0:
            time.sleep(0.002)
        t2 = time.perf_counter()
        store.close()
        t3 = time.perf_counter()
        cpu = time.process_time() - c0
    finally:
        shutil.rmtree(path, ignore_errors=True)
    print(
        f"load {size} B x {n}: put {t1 - t0:.3f} s, dispatch wait {t2 - t1:.3f} s, "
        f"close {t3 - t2:.3f} s, total {t3 - t0:.3f} s: {n / (t3 - t0) / 1e6:.3f} M msg/s, "
        f"{cpu * 1e9 / n:.0f} ns CPU per message"
    )


if __name__ == "__main__":
    main()
