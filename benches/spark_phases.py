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

# The same process-tree CPU clock as `rocketstore bench --spark`.
from rocketstore._bench import _tree_cpu_seconds as tree_cpu_seconds


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
