"""A JVM-only read of a store: ``spark-submit --packages <coordinate> jvm_packages_job.py ROOT``.

The job imports no rocketstore module: ``format("rocketstore")`` is served by the JVM connector
that ``--packages`` (or ``--jars``) put on the classpath, as in a Scala, Java or SQL job. Prints
one JSON line: the jar ``rocketstore.DefaultSource`` came from, the read's physical plan, the
messages per tag, and the rocketstore modules imported (none).
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

root = sys.argv[1]
spark = SparkSession.builder.getOrCreate()
df = spark.read.format("rocketstore").load(root)
counts = {r["tags"]: r["count"] for r in df.groupBy("tags").count().collect()}
plan = str(df.select("tags", "body")._jdf.queryExecution().executedPlan().toString())
jvm = spark.sparkContext._jvm
assert jvm is not None
source = jvm.java.lang.Class.forName(
    "rocketstore.DefaultSource", False, jvm.java.lang.Thread.currentThread().getContextClassLoader()
)
jar = str(source.getProtectionDomain().getCodeSource().getLocation().getPath())
spark.stop()
imported = sorted(
    m for m in sys.modules if m.split(".")[0] in ("rocketstore", "pyspark_rocketstore")
)
print(json.dumps({"connector_jar": jar, "read_plan": plan, "counts": counts, "imported": imported}))
