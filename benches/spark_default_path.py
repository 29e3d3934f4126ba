"""Spark on the default path: ``format("rocketstore")`` beside Parquet on a plain session.

The session is ``SparkSession.builder.master("local[2]").getOrCreate()`` with no configuration
but ``spark.driver.memory`` (2g, as ``rocketstore bench --spark``), and ``import
rocketstore.spark`` after it (``--order``: before it, or never), as a user gets it from the
wheel: whatever path Spark takes by default (the JVM connector when the jar is there) is what
is measured. Workload (issue 43): ``rocketstore bench``'s table of ``--messages``
rows (400,000) of ``--size`` bytes (1 KiB), with a topic, a tag and a key each, as one cached
2-partition DataFrame; each round, in alternating order, for Parquet and for rocketstore:

* ``write``: ``df.write.mode("overwrite")`` of the cached DataFrame (Parquet: snappy);
* ``read``: read back and aggregate: ``groupBy("tags").agg(count(*), sum(length(body)))``.

Each variant gets one untimed warm-up round. Per round: wall seconds and CPU seconds of the
whole process tree (driver, JVM, Python workers; /proc), then the MEDIAN line per variant with
msg/s, CPU ns per message and the time over Parquet's in the same run.

    .venv/bin/python benches/spark_default_path.py --rounds 5
    .venv/bin/python benches/spark_default_path.py --order never --json  # the figures as JSON

:func:`measure` is the function (``rocketstore bench --spark`` can call it with its session).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rocketstore._bench import bench_table, spark_input_table
from rocketstore._bench_common import tree_cpu_seconds

#: The variants, in the order of the first round (later rounds alternate).
VARIANTS = ("parquet_write", "rocketstore_write", "parquet_read", "rocketstore_read")


def measure(
    spark: Any, base: Path, *, messages: int = 400_000, size: int = 1024, rounds: int = 5
) -> dict[str, Any]:
    """Times the write and the read + aggregate of ``messages`` rows of ``size`` B with
    Parquet and with ``format("rocketstore")`` in ``spark``, ``rounds`` rounds after a warm-up;
    returns ``{"rounds": {variant: [(wall, cpu), ...]}, "median": {...}, "ratio": {...}}``."""
    from pyspark.sql import functions as F

    table = spark_input_table(bench_table(messages, size))
    df = spark.createDataFrame(table).repartition(2).cache()
    assert df.count() == messages
    paths = {"parquet": base / "parquet", "rocketstore": base / "rocketstore"}

    def write(fmt: str) -> None:
        p = paths[fmt]
        shutil.rmtree(p, ignore_errors=True)
        w = df.write.mode("overwrite")
        if fmt == "parquet":
            w.parquet(str(p))
        else:
            w.format("rocketstore").save(str(p))

    def read(fmt: str) -> None:
        p = str(paths[fmt])
        r = spark.read.parquet(p) if fmt == "parquet" else spark.read.format("rocketstore").load(p)
        rows = r.groupBy("tags").agg(F.count("*").alias("n"), F.sum(F.length("body"))).collect()
        assert sum(row["n"] for row in rows) == messages, rows

    def run(variant: str) -> tuple[float, float]:
        fmt, what = variant.split("_")
        c0, t0 = tree_cpu_seconds(), time.perf_counter()
        (write if what == "write" else read)(fmt)
        return time.perf_counter() - t0, tree_cpu_seconds() - c0

    got: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    for v in VARIANTS:  # warm-up: JIT, Python workers, the formats' classes
        run(v)
    for r in range(rounds):
        # Alternate which format goes first, so that neither always runs on a warmer JVM.
        order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
        writes = [v for v in order if v.endswith("write")]
        reads = [v for v in order if v.endswith("read")]
        for v in writes:
            got[v].append(run(v))
        for v in reads:
            got[v].append(run(v))
        line = "  ".join(f"{v} {got[v][-1][0]:6.2f} s" for v in VARIANTS)
        print(f"round {r + 1}: {line}", flush=True)
    df.unpersist()
    median = {
        v: {
            "seconds": statistics.median(w for w, _ in got[v]),
            "cpu_seconds": statistics.median(c for _, c in got[v]),
        }
        for v in VARIANTS
    }
    for v in VARIANTS:
        m = median[v]
        m["msg_per_s"] = messages / m["seconds"]
        m["cpu_ns_per_msg"] = m["cpu_seconds"] * 1e9 / messages
    ratio = {
        what: median[f"rocketstore_{what}"]["seconds"] / median[f"parquet_{what}"]["seconds"]
        for what in ("write", "read")
    }
    per_round = {
        what: [
            rs[0] / pq[0]
            for rs, pq in zip(got[f"rocketstore_{what}"], got[f"parquet_{what}"], strict=True)
        ]
        for what in ("write", "read")
    }
    return {"rounds": got, "median": median, "ratio": ratio, "ratio_per_round": per_round}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    ap.add_argument("--messages", type=int, default=400_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--order", choices=("before", "after", "never"), default="after")
    ap.add_argument("--dir", default=os.environ.get("ROCKETSTORE_BENCH_DIR", tempfile.gettempdir()))
    ap.add_argument("--driver-memory", default="2g", help="spark.driver.memory (default 2g)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON at the end")
    args = ap.parse_args()

    if args.order == "before":
        importlib.import_module("rocketstore.spark")
    from pyspark.sql import SparkSession

    # No configuration but the driver's heap: with the default 1 GiB, Parquet's read of the
    # 400 MB table (two 128 MiB row groups at once) beside the cached DataFrame runs out of it.
    builder = SparkSession.builder.master("local[2]")
    spark = builder.config("spark.driver.memory", args.driver_memory).getOrCreate()
    if args.order == "after":
        importlib.import_module("rocketstore.spark")
    spark.sparkContext.setLogLevel("ERROR")
    base = Path(tempfile.mkdtemp(prefix="rocketstore-spark-default-", dir=args.dir))
    try:
        res = measure(spark, base, messages=args.messages, size=args.size, rounds=args.rounds)
    finally:
        spark.stop()
        shutil.rmtree(base, ignore_errors=True)
    n = args.messages
    print(f"{n:,} messages x {args.size} B, local[2], plain session, import {args.order}")
    for v in VARIANTS:
        m = res["median"][v]
        print(
            f"MEDIAN {v:18s} {m['msg_per_s']:12,.0f} msg/s {m['cpu_ns_per_msg']:8,.0f} CPU ns/msg"
            f"  ({m['seconds']:.2f} s)"
        )
    for what in ("write", "read"):
        rounds = ", ".join(f"{x:.2f}" for x in res["ratio_per_round"][what])
        print(
            f"rocketstore/parquet time, {what}: median {res['ratio'][what]:.2f}x "
            f"(per round {rounds})"
        )
    if args.json:
        json.dump(res, sys.stdout)
        print()


if __name__ == "__main__":
    main()
