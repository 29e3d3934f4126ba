"""Wall and whole-process-tree CPU of the demo's Spark jobs, each run twice in one session.

CPU is summed from /proc over the driver and every descendant (Spark's JVM, its Python
workers); the first ingest and verify of a session also start the Python workers and compile
the JVM's code. ``new`` runs the demo's current layout (one partition per store, no
shuffle); ``old`` the repartitioning ingest (any checkout):

    .venv/bin/python benches/spark_phases.py 1000000 /tmp/phases new
    /path/to/main/.venv/bin/python benches/spark_phases.py 1000000 /tmp/phases-main old
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from types import TracebackType

_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds() -> float:
    """utime + stime + cutime + cstime of this process and all its descendants."""
    stats: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                text = fh.read()
        except OSError:
            continue
        rest = text[text.rindex(")") + 2 :].split()
        stats[int(name)] = (int(rest[1]), sum(int(x) for x in rest[11:15]))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0))[1]
        todo.extend(children.get(pid, []))
    return total / _TICK


class Phase:
    """Prints wall, CPU, msg/s and CPU ns/msg of the ``with`` block."""

    def __init__(self, name: str, n: int) -> None:
        self.name, self.n = name, n
        self.t0 = self.c0 = 0.0

    def __enter__(self) -> Phase:
        self.t0, self.c0 = time.perf_counter(), tree_cpu_seconds()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        wall, cpu = time.perf_counter() - self.t0, tree_cpu_seconds() - self.c0
        print(
            f"PHASE {self.name:<16} wall {wall:7.2f} s  cpu {cpu:7.2f} s  "
            f"{self.n / wall:10,.0f} msg/s  {cpu * 1e9 / self.n:9,.0f} CPU ns/msg  "
            f"load {os.getloadavg()[0]:.1f}",
            flush=True,
        )


def main() -> None:
    from rocketstore.cli._demo import demo_geometry
    from rocketstore.cli._spark import session
    from rocketstore.spark.jobs import demo_messages, ingest, verify

    n, root, new = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "new"
    geometry = demo_geometry(n, 4)
    with contextlib.ExitStack() as stack:
        with Phase("session start", n):
            spark = stack.enter_context(session("local[*]", "phases"))
            spark.range(1).count()
        for rep in range(2):
            if new:
                df = demo_messages(spark, n, queues=8, stores=4)
                extra = {"partitioned": True}
            else:
                df, extra = demo_messages(spark, n, queues=8), {}
            with Phase(f"ingest #{rep}", n):
                ingest(
                    df,
                    root,
                    stores=4,
                    mode="overwrite",
                    mapped_file_size_commit_log=64 << 20,
                    **extra,
                    **geometry,
                )
            with Phase(f"verify #{rep}", n):
                report = verify(spark, root, expected=df, **geometry)
            assert report.ok, report.format()


if __name__ == "__main__":
    main()
