"""The streaming sink's throughput beside the batch writer's, in one run on one session.

Workload: ``rocketstore bench``'s table of ``--messages`` rows (200,000) of ``--size`` bytes
(1 KiB) with a topic, a tag and a key each, written once as ``--files`` Parquet files (10).
Each round, in alternating order, the same files go:

* ``batch_jvm``: ``spark.read.parquet(src).write.format("rocketstore")`` (the default path: the
  JVM writer when the connector's jar is in the session);
* ``batch_py``: the same with ``spark.rocketstore.jvmWriter=false`` (the Python writer);
* ``sink``: ``spark.readStream.parquet(src)`` with ``maxFilesPerTrigger`` (``--per-trigger``,
  2: five micro-batches) into ``writeStream.format("rocketstore")`` with ``stores`` 2 and
  ``trigger(availableNow=True)``: task records, commit records, flushes and cleanup included.

Per round: wall seconds and CPU seconds of the whole process tree (driver, JVM, Python workers;
/proc); then a MEDIAN line per variant with msg/s and CPU ns per message. Each variant gets an
untimed warm-up round.

    .venv/bin/python benches/sink_vs_batch.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rocketstore._bench import (
    _tree_cpu_seconds,
    bench_spark_session,
    bench_table,
    spark_input_table,
)

VARIANTS = ("batch_jvm", "batch_py", "sink")


def _write_source(spark: Any, src: Path, n: int, size: int, files: int) -> None:
    import pyarrow.parquet as pq

    table = spark_input_table(bench_table(n, size))
    src.mkdir(parents=True)
    step = -(-n // files)
    for i in range(files):
        pq.write_table(table.slice(i * step, step), src / f"part-{i:03d}.parquet")


def _run(spark: Any, variant: str, src: Path, out: Path, per_trigger: int) -> None:
    from rocketstore.spark._jvm import WRITER_CONF

    shutil.rmtree(out, ignore_errors=True)
    if variant == "sink":
        schema = spark.read.parquet(str(src)).schema
        q = (
            spark.readStream.schema(schema)
            .option("maxFilesPerTrigger", per_trigger)
            .parquet(str(src))
            .writeStream.format("rocketstore")
            .option("checkpointLocation", str(out) + "-ckpt")
            .option("stores", 2)
            .trigger(availableNow=True)
            .start(str(out))
        )
        q.awaitTermination()
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))
        shutil.rmtree(str(out) + "-ckpt", ignore_errors=True)
        return
    spark.conf.set(WRITER_CONF, "false" if variant == "batch_py" else "true")
    spark.read.parquet(str(src)).write.format("rocketstore").mode("overwrite").save(str(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--per-trigger", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    spark = bench_spark_session("rocketstore-sink-bench")
    import rocketstore.spark

    rocketstore.spark.register(spark)
    work = Path(tempfile.mkdtemp(prefix="rocketstore-sink-bench-"))
    got: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    try:
        src = work / "src"
        _write_source(spark, src, args.messages, args.size, args.files)
        for v in VARIANTS:  # warm-up
            _run(spark, v, src, work / v, args.per_trigger)
        for r in range(args.rounds):
            order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
            for v in order:
                c0, t0 = _tree_cpu_seconds(), time.perf_counter()
                _run(spark, v, src, work / v, args.per_trigger)
                wall, cpu = time.perf_counter() - t0, _tree_cpu_seconds() - c0
                got[v].append((wall, cpu))
                print(f"round {r} {v:10s} {wall:7.2f} s wall {cpu:7.2f} s CPU", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    n = args.messages
    result = {}
    for v in VARIANTS:
        w = statistics.median(x for x, _ in got[v])
        c = statistics.median(x for _, x in got[v])
        result[v] = {"msg_per_s": n / w, "cpu_ns_per_msg": c * 1e9 / n}
        print(
            f"MEDIAN {args.size:5d} B {v:10s} {n / w:12,.0f} msg/s {c * 1e9 / n:8,.0f} CPU ns/msg"
        )
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
