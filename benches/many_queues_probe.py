"""Page cache and CPU of a store with many queues and few messages each (a broker's shape).

``put_batch`` of 10 messages of 100 B into each of 256 queues of one topic, wait until they
are dispatched, then count the consume queue pages resident in the page cache (util-linux
``fincore``) and the whole process's CPU time from the open::

    .venv/bin/python benches/many_queues_probe.py          # 256 queues x 10 messages
    .venv/bin/python benches/many_queues_probe.py 1024 4  # 1,024 queues x 4 messages
    .venv/bin/python benches/many_queues_probe.py 256 10 --reopen

With ``--reopen`` the store is then closed, its consume queue files are dropped from the page
cache (``fsync``, then ``POSIX_FADV_DONTNEED``), and it is opened again: the open's wall and
CPU time and the pages it brought in are printed, then the same messages are appended again
and the pages counted once more.

``ROCKETSTORE_BENCH_DIR`` picks the directory for the store (default: the temp dir).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import rocketstore


def cq_files(path: str) -> list[str]:
    return [
        os.path.join(d, f)
        for d, _, names in os.walk(os.path.join(path, "consumequeue"))
        for f in names
    ]


def resident_mib(files: list[str]) -> float:
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", *files],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sum(int(x) for x in out.split()) / 2**20


def put_and_dispatch(s: rocketstore.MessageStore, msgs: list[dict[str, object]]) -> None:
    s.put_batch(msgs)
    while s.stats().get("dispatch_behind_bytes", 0) > 0:
        time.sleep(0.001)


def evict(files: list[str]) -> None:
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def open_store(path: str, queues: int) -> rocketstore.MessageStore:
    return rocketstore.MessageStore(
        path, populate_mapped_file=False, max_queue_nums_per_topic=max(1024, queues)
    )


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--reopen"]
    reopen = "--reopen" in sys.argv[1:]
    queues = int(args[0]) if len(args) > 0 else 256
    per_queue = int(args[1]) if len(args) > 1 else 10
    base = os.environ.get("ROCKETSTORE_BENCH_DIR", tempfile.gettempdir())
    path = os.path.join(base, f"rocketstore-many-queues-{os.getpid()}")
    shutil.rmtree(path, ignore_errors=True)
    msgs: list[dict[str, object]] = [
        {"topic": "Many", "queue_id": q, "body": b"x" * 100}
        for q in range(queues)
        for _ in range(per_queue)
    ]
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        with open_store(path, queues) as s:
            put_and_dispatch(s, msgs)
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
            resident = resident_mib(cq_files(path))
        print(
            f"{queues} queues x {per_queue} messages: consume queue pages resident "
            f"{resident:.1f} MiB, CPU {cpu * 1e3:.0f} ms, wall {wall * 1e3:.0f} ms"
        )
        if not reopen:
            return
        files = cq_files(path)
        evict(files)
        before = resident_mib(files)
        c0, t0 = time.process_time(), time.perf_counter()
        with open_store(path, queues) as s:
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
            opened = resident_mib(files)
            c1 = time.process_time()
            put_and_dispatch(s, msgs)
            put_cpu = time.process_time() - c1
            after = resident_mib(cq_files(path))
        print(
            f"reopen (consume queue pages resident before: {before:.1f} MiB): wall "
            f"{wall * 1e3:.0f} ms, CPU {cpu * 1e3:.0f} ms, resident {opened:.1f} MiB; "
            f"{per_queue} more per queue: CPU {put_cpu * 1e3:.0f} ms, resident {after:.1f} MiB"
        )
    finally:
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
