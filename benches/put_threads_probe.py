"""Python ``put_batch`` from Arrow on the ``rocketstore bench`` shape, per thread.

The messages, store options and call size of ``rocketstore bench``'s ``put_batch`` row
(``rocketstore._bench``: 4 topics x 8 queues, dictionary-typed topic and tags, a distinct key
per row, 256 MiB commit log files, 16,384-row calls), so the figure compares with the Rust
criterion case ``append_async/put_batch_py_shape/<size> cpu`` (``benches/append.rs``). After
the warm-up put the store's threads are left to go idle, then every call is timed until all is
dispatched. Prints msg/s (inside the calls, as the bench row, and until dispatched), whole-
process CPU ns per message, each thread's CPU ns per message (``/proc/self/task/*/schedstat``)
and the calling thread's minor page faults::

    .venv/bin/python benches/put_threads_probe.py 1024 [messages]

``PROBE_BENCH_START=1`` starts the calls right after the warm-up put, as ``rocketstore bench``
does (the first files are still being made and pre-faulted during the calls). After the window
the probe waits for the threads to go idle and prints the CPU they spent after it
(``after the window``: work the bench row never sees, such as pre-faulting a file that is not
written). ``ROCKETSTORE_BENCH_DIR`` picks the directory for the store (default: the temp dir);
``PERF_OUT=file`` records ``perf record -e cpu-clock -g`` (``PERF_EV``, ``PERF_G`` override
the event and the call-graph option) of exactly the measured window.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from rocketstore import _bench


def tasks() -> dict[str, tuple[str, int, int]]:
    """Thread id -> (name, CPU ns, minor faults) of every thread of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as fh:
                comm = fh.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as fh:
                ns = int(fh.read().split()[0])
            with open(f"/proc/self/task/{tid}/stat") as fh:
                flt = int(fh.read().rsplit(")", 1)[1].split()[7])
        except OSError:
            continue
        out[tid] = (comm, ns, flt)
    return out


def main() -> None:
    size = int(sys.argv[1])
    o = _bench.BenchOptions()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else o.messages_for(size)
    t = _bench.bench_table(n, size)
    batches = [t.slice(i, o.batch) for i in range(0, n, o.batch)]
    base = Path(os.environ.get("ROCKETSTORE_BENCH_DIR", tempfile.gettempdir()))
    path = base / f"rocketstore-put-threads-{size}"
    shutil.rmtree(path, ignore_errors=True)
    store = _bench._open(path, o)
    store.put("BenchWarmup", b"x")
    if os.environ.get("PROBE_BENCH_START") != "1":
        _bench._wait_background_idle()
    me = str(threading.get_native_id())
    perf = None
    if os.environ.get("PERF_OUT"):
        cmd = ["perf", "record", "-e", os.environ.get("PERF_EV", "cpu-clock")]
        cmd += os.environ.get("PERF_G", "-g").split()
        cmd += ["-p", str(os.getpid()), "-o", os.environ["PERF_OUT"]]
        perf = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
    before = tasks()
    c0, w0 = time.process_time(), time.perf_counter()
    in_calls = 0.0
    for part in batches:
        a = time.perf_counter()
        store.put_batch(part)
        in_calls += time.perf_counter() - a
    _bench._wait_dispatched(store)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    after = tasks()
    if perf is not None:
        perf.send_signal(signal.SIGINT)
        perf.wait()
    _bench._wait_background_idle()
    idle = tasks()
    store.close()
    shutil.rmtree(path, ignore_errors=True)
    per: dict[str, int] = {}
    faults = 0
    for tid, (comm, ns, flt) in after.items():
        _, ns0, flt0 = before.get(tid, (comm, 0, 0))
        name = "caller" if tid == me else comm
        per[name] = per.get(name, 0) + ns - ns0
        if tid == me:
            faults = flt - flt0
    threads = ", ".join(
        f"{k} {v / n:.0f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v >= n
    )
    later: dict[str, int] = {}
    for tid, (comm, ns, _) in idle.items():
        if tid != me:
            later[comm] = later.get(comm, 0) + ns - after.get(tid, (comm, ns, 0))[1]
    tail = ", ".join(f"{k} {v / n:.0f}" for k, v in sorted(later.items()) if v >= n)
    print(
        f"python put_batch {size} B, {n} msgs: {n / in_calls / 1e6:.3f} M msg/s in the calls, "
        f"{n / wall / 1e6:.3f} M until dispatched; {cpu * 1e9 / n:.0f} ns CPU per message "
        f"(whole process; by thread: {threads}); caller minor faults {faults}; "
        f"after the window: {tail or 'nothing'}",
        flush=True,
    )


if __name__ == "__main__":
    main()
