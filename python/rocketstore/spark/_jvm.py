"""The JVM reader of the ``rocketstore`` data source: where its jar and native library are,
and the Spark settings that load them.

``make build`` puts ``rocketstore-spark.jar`` (``jvm/``) and ``librocketstore_jni.so``
(``crates/rocketstore-jni``) in ``rocketstore/spark/jvm/``. With the jar on Spark's classpath,
``format("rocketstore")`` resolves to its ``RocketStoreProvider``: batch reads of the messages
table are served by a DataSource V2 scan with column pruning and columnar batches built in
Rust; every other read, every write and both streaming directions are the Python data
source's, unchanged (see ``docs/spark.md``, "The JVM reader"). Without the files (a wheel
built without Java) nothing is added and the Python data source serves everything.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENABLED_CONF", "JVM_DIR", "WRITER_CONF", "jvm_reader_conf", "jvm_reader_files"]

#: Directory holding the jar and the native library.
JVM_DIR = Path(__file__).with_name("jvm")

#: Spark setting that turns the JVM reader off for a session (``"false"``): every read is
#: then the Python data source's, even with the jar loaded.
ENABLED_CONF = "spark.rocketstore.jvmReader"

#: Spark setting that turns the JVM batch writer off for a session (``"false"``): the tasks of
#: every write are then the Python data source's, even with the jar loaded.
WRITER_CONF = "spark.rocketstore.jvmWriter"

_JAR = "rocketstore-spark.jar"
_LIB = "librocketstore_jni.so"


def jvm_reader_files() -> tuple[Path, Path] | None:
    """``(jar, native library)`` if both were built, else ``None``."""
    jar, lib = JVM_DIR / _JAR, JVM_DIR / _LIB
    if jar.is_file() and lib.is_file():
        return jar, lib
    return None


def jvm_reader_conf(existing_jars: str | None = None) -> dict[str, str]:
    """The Spark settings that load the JVM reader, or ``{}`` when it was not built.

    ``spark.jars`` gets the jar appended to ``existing_jars``; the native library's path is
    passed to the driver through the environment variable ``ROCKETSTORE_JNI_LIBRARY`` (set in
    this process if unset, so the JVM PySpark starts inherits it) and to executors through
    ``spark.executorEnv``. Must be applied before the session's JVM starts.

    Example::

        builder = SparkSession.builder.master("local[2]")
        for key, value in jvm_reader_conf().items():
            builder = builder.config(key, value)
    """
    files = jvm_reader_files()
    if files is None:
        return {}
    jar, lib = files
    os.environ.setdefault("ROCKETSTORE_JNI_LIBRARY", str(lib))
    jars = ",".join(j for j in (existing_jars, str(jar)) if j)
    return {
        "spark.jars": jars,
        "spark.executorEnv.ROCKETSTORE_JNI_LIBRARY": os.environ["ROCKETSTORE_JNI_LIBRARY"],
    }
