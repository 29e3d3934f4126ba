"""The jobs of ``rocketstore demo`` one at a time, in one warm Spark session (local[*]).

    .venv/bin/python benches/demo_probe.py verify ROOT    # ROOT: a demo's --store directory
    .venv/bin/python benches/demo_probe.py digests
    .venv/bin/python benches/demo_probe.py ingest /work/tmp/q/ingest-probe

* ``verify``: the two jobs of ``verify(spark, ROOT, expected=df)`` alone and together: the
  source's per-queue message digests (``verify._source_digests``), the per-store checks
  (``verify`` without ``expected``), then both; the demo's 1,000,000 generated messages.
* ``digests``: the source aggregation with other per-row digests (what the old SHA-256 digest
  cost, and its parts), against generating and aggregating the rows with no digest.
* ``ingest``: the demo's warm-up, then the timed ingest of 1,000,000 messages into 4 stores
  (prints "timed ingest starts" a second before it, to start ``perf record -a`` with it), then
  the generation alone with one aggregation that reads every column.

Rounds after the first are printed (the first compiles the JVM's code); seconds of wall time.
``PROBE_CONF='key=value|key=value'`` adds Spark settings to the session.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from rocketstore.cli._demo import demo_geometry
from rocketstore.cli._spark import _WARM_UP, _warm_up, session
from rocketstore.spark._demo import demo_messages
from rocketstore.spark._ingest import ingest

# rocketstore.spark re-exports the function `verify` under the module's name.
V: Any = importlib.import_module("rocketstore.spark.verify")

N = 1_000_000
STORES = 4
QUEUES = 8


def timed(f: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def probe_verify(spark: Any, root: str) -> None:
    df = demo_messages(spark, N, queues=QUEUES, stores=STORES)
    geometry = demo_geometry(N, STORES)
    for r in range(3):
        source = timed(lambda: V._source_digests(df, True))
        stores = timed(lambda: V.verify(spark, root, **geometry))
        both = timed(lambda: V.verify(spark, root, expected=df, **geometry))
        if r:
            print(
                f"round {r}: source digests {source:.2f} s, store job {stores:.2f} s, "
                f"verify(expected=df) {both:.2f} s",
                flush=True,
            )


def probe_digests(spark: Any) -> None:
    from pyspark.sql import functions as F

    df = demo_messages(spark, N, queues=QUEUES, stores=STORES)
    norm = V._normalized(df, True, body_hash=False)
    zero = F.lit("\x00")
    keys, tags = F.coalesce(F.col("keys"), F.lit("")), F.coalesce(F.col("tags"), F.lit(""))
    queue = F.col("queue_id").cast("string")

    def hi_lo(hex_digest: Any) -> list[Any]:
        return [
            F.sum(F.conv(F.substring(hex_digest, 1, 7), 16, 10).cast("long")),
            F.sum(F.conv(F.substring(hex_digest, 8, 8), 16, 10).cast("long")),
        ]

    old = F.sha2(
        F.concat("topic", zero, queue, zero, keys, zero, tags, zero, F.sha2("body", 256)), 256
    )
    binary = F.sha2(
        F.concat(
            *[c.cast("binary") for c in (F.col("topic"), zero, queue, zero, keys, zero, tags)],
            F.lit(b"\x00"),
            F.col("body"),
        ),
        256,
    )
    xx = F.xxhash64("topic", "queue_id", "keys", "tags", "body")
    variants: dict[str, list[Any]] = {
        "no digest: sum(length(body))": [F.sum(F.length("body"))],
        "sha2(body) only": [F.sum(F.length(F.sha2("body", 256)))],
        "old: two sha2, conv, decimal sum": [
            F.sum(F.conv(F.substring(old, 1, 15), 16, 10).cast("decimal(20,0)"))
        ],
        "two sha2, two long sums": hi_lo(old),
        "one sha2 over binary, two long sums": hi_lo(binary),
        "xxhash64, two long sums": [
            F.sum(F.shiftrightunsigned(xx, 32)),
            F.sum(xx.bitwiseAND(F.lit(0xFFFFFFFF))),
        ],
    }
    for r in range(3):
        for name, cols in variants.items():
            grouped = norm.groupBy("topic", "queue_id").agg(F.count("*"), *cols)
            seconds = timed(grouped.collect)
            if r:
                print(f"round {r}: {seconds:6.2f} s  {name}", flush=True)


def probe_ingest(spark: Any, root: str) -> None:
    _warm_up(spark, min(_WARM_UP, max(1_000, N // 50)), STORES, QUEUES)  # as the demo
    df = demo_messages(spark, N, queues=QUEUES, stores=STORES)
    geometry = demo_geometry(N, STORES)
    for r in range(2):
        print("timed ingest starts", flush=True)
        time.sleep(1.0)
        seconds = timed(
            lambda: ingest(
                df,
                root,
                stores=STORES,
                partitioned=True,
                mode="overwrite",
                mapped_file_size_commit_log=64 << 20,
                **geometry,
            )
        )
        gen = timed(
            lambda: df.selectExpr("sum(length(body))", "count(keys)", "count(tags)").collect()
        )
        print(f"round {r}: ingest {seconds:.2f} s, generation alone {gen:.2f} s", flush=True)


def main() -> None:
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    conf = os.environ.get("PROBE_CONF")
    with session("local[*]", "demo-probe", conf=conf.split("|") if conf else None) as spark:
        if what == "verify" and len(sys.argv) > 2:
            probe_verify(spark, sys.argv[2])
        elif what == "digests":
            probe_digests(spark)
        elif what == "ingest" and len(sys.argv) > 2:
            probe_ingest(spark, sys.argv[2])
        else:
            sys.exit(__doc__)


if __name__ == "__main__":
    main()
