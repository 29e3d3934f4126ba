"""Floor of ``get_message_arrow``'s memory access, with no store code: the loads of one queue's
records in queue order (every 32nd record of the commit log in the bench's shape), as numpy
gathers over the commit log files mapped with ``numpy.memmap``.

Uses a store prepared by ``benches/read_probe.py SIZE prep`` (same ``READ_PROBE_MESSAGES``).
The consume queue units are read before the clock starts; each pass then, queue by queue:

* ``first``: loads the first byte of every record (one cache line and one page per record);
* ``lines``: loads one byte of every 64-byte line of every record (all of each record's lines:
  what a decode that reads every byte needs);

CPU is ``time.process_time()`` (one thread: numpy does not start threads for these), per
message; the first pass of a process also maps the pages in, as the store's first read does.

    READ_PROBE_MESSAGES=1000000 .venv/bin/python benches/strided_floor.py 100 3
"""

import os
import sys
import tempfile
import time

import numpy as np

import rocketstore

N = int(os.environ.get("READ_PROBE_MESSAGES", "300000"))
FILE_SIZE = 256 << 20


def main() -> None:
    size = int(sys.argv[1])
    passes = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    path = os.path.join(tempfile.gettempdir(), f"rocketstore-read-probe-{size}-{N}")
    s = rocketstore.MessageStore(path, read_only=True)
    files = s.commitlog_files()
    queues = []
    for t in range(4):
        for q in range(8):
            units = s.read_consume_queue(f"BenchTopic{t}", q, 0, 1 << 30)
            queues.append(
                (
                    units.column("commitlog_offset").to_numpy(),
                    units.column("size").to_numpy().astype(np.int64),
                )
            )
    s.close()
    maps = [np.memmap(f, dtype=np.uint8, mode="r") for f in files]
    bases = [int(os.path.basename(f)) for f in files]

    def groups(offs: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(file index, positions in the file, row indices) per file, in queue order."""
        out = []
        fi = np.searchsorted(np.array(bases), offs, side="right") - 1
        for k in np.unique(fi):
            rows = np.nonzero(fi == k)[0]
            out.append((int(k), offs[rows] - bases[k], rows))
        return out

    plans = []
    for offs, sizes in queues:
        per_file = []
        for k, pos, rows in groups(offs):
            sz = sizes[rows]
            lines = (sz + 63) // 64
            line_idx = np.repeat(pos, lines) + 64 * (
                np.arange(lines.sum()) - np.repeat(np.cumsum(lines) - lines, lines)
            )
            per_file.append((k, pos, line_idx))
        plans.append(per_file)
    total = sum(len(o) for o, _ in queues)
    for what in ("first", "lines"):
        for p in range(passes):
            acc = 0
            c0, t0 = time.process_time(), time.perf_counter()
            for per_file in plans:
                for k, pos, line_idx in per_file:
                    idx = pos if what == "first" else line_idx
                    acc += int(np.take(maps[k], idx).sum())
            wall = time.perf_counter() - t0
            cpu = time.process_time() - c0
            print(
                f"strided {what} {size} B pass {p + 1}: {total} msgs, "
                f"{total / wall / 1e6:.2f} M msg/s, "
                f"{cpu * 1e9 / total:.0f} ns CPU per message (check {acc % 997})"
            )


if __name__ == "__main__":
    main()
