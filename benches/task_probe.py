"""Store-side probe of one Spark write task: a fresh store per round, written the way the Spark
writer writes it (``populate_mapped_file=False``, RocketMQ's default consume queue and index
geometry), with the ``rocketstore bench`` table (4 topics x 8 queues, a tag and a distinct key
per row) in 10,000-row ``put_batch`` calls, then ``flush`` and ``close``.

Per round it prints msg/s (rows over the wall time from the first put to the end of ``close``),
whole-process CPU ns per row (``time.process_time()``: every thread), the CPU per row of each
store thread read just before ``close`` (``rs-reput`` is the dispatch), and the wall time of
``close`` (what the task waits for at its end)::

    .venv/bin/python benches/task_probe.py --size 100 --rows 125000 --rounds 3
    .venv/bin/python benches/task_probe.py --size 1024 --rounds 5 --modes mapping,pwrite

Run it under ``strace -f -c -e trace=fsync,fdatasync,msync`` to count the syscalls of a round.
``ROCKETSTORE_BENCH_DIR`` picks the directory for the stores (default: the temp dir).
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

import rocketstore
from rocketstore._bench import bench_table, spark_input_table

BATCH = 10_000
TICK_NS = 1e9 / os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict[str, float]:
    """CPU ns of each thread of this process, summed by thread name."""
    out: dict[str, float] = {}
    base = f"/proc/{os.getpid()}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) * TICK_NS
    return out


def one_round(path: str, batches: list, rows: int, pwrite: bool) -> dict[str, float]:
    shutil.rmtree(path, ignore_errors=True)
    c0, w0 = time.process_time(), time.perf_counter()
    store = rocketstore.MessageStore(
        path,
        mapped_file_size_commit_log=256 << 20,
        populate_mapped_file=False,
        pwrite_commit_log=pwrite,
    )
    m0 = time.thread_time()
    t0 = thread_cpu()
    for b in batches:
        store.put_batch(b)
    store.flush()
    while store.stats().get("dispatch_behind_bytes", 0) > 0:
        time.sleep(0.001)
    main_s = time.thread_time() - m0
    t1 = thread_cpu()
    wc = time.perf_counter()
    store.close()
    close_s = time.perf_counter() - wc
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    shutil.rmtree(path, ignore_errors=True)
    r = {
        "msg/s": rows / wall,
        "cpu ns": cpu * 1e9 / rows,
        "close ms": close_s * 1e3,
        "writer": main_s * 1e9 / rows,
    }
    for name in sorted(t1):
        if name.startswith("rs-"):
            r[name] = (t1[name] - t0.get(name, 0.0)) / rows
    return r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rows", type=int, default=125_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--modes",
        default="mapping",
        help="comma-separated, alternated round by round: mapping (records stored into the "
        "mapping) and/or pwrite (pwrite_commit_log)",
    )
    ap.add_argument("--dir", default=os.environ.get("ROCKETSTORE_BENCH_DIR", tempfile.gettempdir()))
    a = ap.parse_args()
    table = spark_input_table(bench_table(a.rows, a.size))
    batches = [table.slice(i, BATCH) for i in range(0, a.rows, BATCH)]
    path = os.path.join(a.dir, f"rocketstore-task-probe-{os.getpid()}")
    modes = [m for m in a.modes.split(",") if m]
    got: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for _ in range(a.rounds):
        for m in modes:
            r = one_round(path, batches, a.rows, m == "pwrite")
            got[m].append(r)
            print(f"{m:8s} " + "  ".join(f"{k} {v:,.0f}" for k, v in r.items()), flush=True)
    keys = ["msg/s", "cpu ns", "close ms", "writer", "rs-reput"]
    for m in modes:
        med = {k: statistics.median(r.get(k, 0.0) for r in got[m]) for k in keys}
        print(f"MEDIAN size {a.size} {m}: " + "  ".join(f"{k} {v:,.0f}" for k, v in med.items()))


if __name__ == "__main__":
    main()
