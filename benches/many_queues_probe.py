"""Page cache and CPU of a store with many queues and few messages each (a broker's shape).

``put_batch`` of 10 messages of 100 B into each of 256 queues of one topic, wait until they
are dispatched, then count the consume queue pages resident in the page cache (util-linux
``fincore``) and the whole process's CPU time from the open::

    .venv/bin/python benches/many_queues_probe.py          # 256 queues x 10 messages
    .venv/bin/python benches/many_queues_probe.py 1024 4  # 1,024 queues x 4 messages

``ROCKETSTORE_BENCH_DIR`` picks the directory for the store (default: the temp dir).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import rocketstore


def main() -> None:
    queues = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    per_queue = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    base = os.environ.get("ROCKETSTORE_BENCH_DIR", tempfile.gettempdir())
    path = os.path.join(base, f"rocketstore-many-queues-{os.getpid()}")
    shutil.rmtree(path, ignore_errors=True)
    msgs = [
        {"topic": "Many", "queue_id": q, "body": b"x" * 100}
        for q in range(queues)
        for _ in range(per_queue)
    ]
    c0, t0 = time.process_time(), time.perf_counter()
    with rocketstore.MessageStore(
        path, populate_mapped_file=False, max_queue_nums_per_topic=max(1024, queues)
    ) as s:
        s.put_batch(msgs)
        while s.stats().get("dispatch_behind_bytes", 0) > 0:
            time.sleep(0.001)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        files = [
            os.path.join(d, f)
            for d, _, names in os.walk(os.path.join(path, "consumequeue"))
            for f in names
        ]
        out = subprocess.run(
            ["fincore", "--bytes", "--noheadings", "--output", "RES", *files],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        resident = sum(int(x) for x in out.split())
    shutil.rmtree(path, ignore_errors=True)
    print(
        f"{queues} queues x {per_queue} messages: consume queue pages resident "
        f"{resident / 2**20:.1f} MiB, CPU {cpu * 1e3:.0f} ms, wall {wall * 1e3:.0f} ms"
    )


if __name__ == "__main__":
    main()
