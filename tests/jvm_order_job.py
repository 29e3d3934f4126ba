"""A user's Spark script, run as ``<venv>/bin/python jvm_order_job.py ORDER WORKDIR``.

A plain ``SparkSession.builder.master("local[2]").getOrCreate()`` (no configuration at all),
with ``import rocketstore.spark`` before it (ORDER ``before``), after it (``after``) or never
(``never``: Spark finds the Python data source through ``pyspark_rocketstore``, the wheel's
``.pth`` puts the JVM connector on the driver's classpath). It writes 2,000 rows with
``format("rocketstore")`` in 2 tasks, reads them back and aggregates, then (unless a third
argument ``--no-fallback`` is given) does the same with ``spark.rocketstore.jvm=false``.
Prints one JSON line: the plans of the reads, the write commands' plans, and the counts
(tests/test_wheel.py checks them).
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

order, work = sys.argv[1], Path(sys.argv[2])
fallback = sys.argv[3:] != ["--no-fallback"]
assert order in ("before", "after", "never"), order

if order == "before":
    importlib.import_module("rocketstore.spark")

spark = SparkSession.builder.master("local[2]").getOrCreate()

if order == "after":
    importlib.import_module("rocketstore.spark")


def plan(df: DataFrame) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def write_plans() -> list[str]:
    """The physical plans of the SQL executions so far (the listener is asynchronous)."""
    jvm_session = spark._jsparkSession
    store = jvm_session.sharedState().statusStore()
    executions = store.executionsList()
    return [str(executions.apply(i).physicalPlanDescription()) for i in range(executions.size())]


def job(root: Path) -> dict[str, Any]:
    df = spark.range(2000, numPartitions=2).select(
        F.lit("TopicA").alias("topic"),
        F.concat(F.lit("body-"), F.col("id").cast("string")).cast("binary").alias("body"),
        F.concat(F.lit("Tag"), (F.col("id") % 3).cast("string")).alias("tags"),
        F.concat(F.lit("key-"), F.col("id").cast("string")).alias("keys"),
    )
    df.write.format("rocketstore").mode("append").save(str(root))
    back = spark.read.format("rocketstore").load(str(root))
    counts = {r["tags"]: r["count"] for r in back.groupBy("tags").count().collect()}
    return {"read_plan": plan(back.select("tags", "body")), "counts": counts}


def connector_jar() -> str | None:
    """The jar the session's ``rocketstore.DefaultSource`` comes from (None: not loaded)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        cls = jvm.java.lang.Class.forName("rocketstore.DefaultSource", False, loader)
    except Exception:
        return None
    return str(cls.getProtectionDomain().getCodeSource().getLocation().getPath())


report: dict[str, Any] = {"order": order, "default": job(work / "default")}
report["connector_jar"] = connector_jar()
if fallback:
    spark.conf.set("spark.rocketstore.jvm", "false")
    report["off"] = job(work / "off")
writes = 2 if fallback else 1
deadline = time.monotonic() + 30
plans = write_plans()
while sum("AppendData" in p for p in plans) < writes and time.monotonic() < deadline:
    time.sleep(0.2)
    plans = write_plans()
report["write_plans"] = [p for p in plans if "AppendData" in p]
report["imported"] = "rocketstore.spark" in sys.modules
spark.stop()
print(json.dumps(report))
