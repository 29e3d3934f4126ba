"""Puts rocketstore's JVM Spark connector on the classpath of Spark JVMs this process starts.

Run at interpreter start by ``rocketstore_spark_jvm.pth`` (installed by the wheel next to this
package), so that ``format("rocketstore")`` takes the JVM connector in a plain
``SparkSession.builder.getOrCreate()`` even when ``rocketstore.spark`` is never imported: it
appends ``rocketstore/spark/jvm/rocketstore-spark.jar`` to ``SPARK_DIST_CLASSPATH``, which
Spark's launcher adds to the driver's classpath. The jar registers no service that Spark would
load for other formats: it is loaded only when a job asks for ``rocketstore``.

Cheap by design (no import beyond ``os``): it runs in every interpreter of the environment.
``ROCKETSTORE_SPARK_JVM=0`` (or ``false``/``no``/``off``) turns it off.
"""

import os


def _add() -> None:
    if os.environ.get("ROCKETSTORE_SPARK_JVM", "").strip().lower() in ("0", "false", "no", "off"):
        return
    jar = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        "rocketstore",
        "spark",
        "jvm",
        "rocketstore-spark.jar",
    )
    if not os.path.isfile(jar):
        return
    entries = [e for e in os.environ.get("SPARK_DIST_CLASSPATH", "").split(os.pathsep) if e]
    if jar not in entries:
        os.environ["SPARK_DIST_CLASSPATH"] = os.pathsep.join([*entries, jar])


_add()
