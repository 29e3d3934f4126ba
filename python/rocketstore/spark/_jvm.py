"""The JVM connector of the ``rocketstore`` data source: where its jar is, and how Spark gets it.

The wheel (and ``make build``) holds one jar, ``rocketstore/spark/jvm/rocketstore-spark.jar``:
the classes of ``jvm/`` and, inside it, the native library of ``crates/rocketstore-jni`` for the
platform the wheel was built for. Every JVM that has the jar loads the library from it, so a
cluster's executors need nothing but the jar Spark ships them.

With the jar on the driver's classpath, ``format("rocketstore")`` resolves to the class
``rocketstore.DefaultSource`` (Spark's rule for a format name no registered source claims,
tried before Python data sources): batch reads of the messages table become a DataSource V2
scan with columnar batches built in Rust, and the tasks of batch writes run in the JVM; every
other read, the driver side of writes and both streaming directions are the Python data
source's (see ``docs/spark.md``, "The JVM connector"). The jar gets there with no configuration:

* before the session's JVM starts, :func:`add_to_launch_environment` appends the jar to
  ``SPARK_DIST_CLASSPATH`` (which Spark's launcher puts on the driver's classpath), so a session
  built afterwards has it. The wheel's ``rocketstore_spark_jvm.pth`` does this at interpreter start
  (``_rocketstore_spark_jvm``), so the connector is there even when ``rocketstore.spark`` is
  never imported; ``import rocketstore.spark`` does it too (an editable install has no ``.pth``);
* on a session that is already running without it, :func:`add_to_session` (run by
  ``import rocketstore.spark`` and :func:`rocketstore.spark.register`) adds it as ``ADD JAR``
  does, for the calling thread's lookups and for the executors.

On a cluster the driver adds the jar to the session's jars itself (``sc.addJar``) unless one of
that name is there, so the executors get it.

Switches: the environment variable :data:`ENV_SWITCH` set to ``0``/``false``/``off`` keeps the jar
out of every JVM this process starts or meets; the Spark conf :data:`CONNECTOR_CONF` (and
:data:`ENABLED_CONF` for reads, :data:`WRITER_CONF` for writes) set to ``false`` turns the JVM
path off for a session while the jar is loaded. Either way the Python data source serves the
jobs and says so once, in one line, with the reason.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "CONNECTOR_CONF",
    "ENABLED_CONF",
    "ENV_SWITCH",
    "JAR",
    "JVM_DIR",
    "WRITER_CONF",
    "add_to_launch_environment",
    "add_to_session",
    "jar_path",
    "jvm_reader_conf",
    "jvm_reader_files",
    "main",
    "session_has_connector",
    "switched_off",
]

#: Directory holding the jar.
JVM_DIR = Path(__file__).with_name("jvm")

#: The jar's file name.
JAR = "rocketstore-spark.jar"

#: Spark setting that turns the JVM connector off for a session (``"false"``): every read and
#: write is then the Python data source's, even with the jar loaded.
CONNECTOR_CONF = "spark.rocketstore.jvm"

#: Spark setting that turns the JVM reader off for a session (``"false"``).
ENABLED_CONF = "spark.rocketstore.jvmReader"

#: Spark setting that turns the JVM batch writer off for a session (``"false"``).
WRITER_CONF = "spark.rocketstore.jvmWriter"

#: Environment variable: ``0``, ``false``, ``no`` or ``off`` keeps the jar out of every Spark
#: JVM this process starts or registers the data source on.
ENV_SWITCH = "ROCKETSTORE_SPARK_JVM"

#: The class Spark resolves ``format("rocketstore")`` to when the jar is loaded.
PROVIDER_CLASS = "rocketstore.DefaultSource"

_CLASSPATH_ENV = "SPARK_DIST_CLASSPATH"
_OFF = frozenset({"0", "false", "no", "off"})


def switched_off() -> bool:
    """True if :data:`ENV_SWITCH` turns the connector off for this process."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() in _OFF


def jar_path() -> Path | None:
    """The connector's jar, or ``None`` when it was not built (no Java at build time)."""
    jar = JVM_DIR / JAR
    return jar if jar.is_file() else None


def jvm_reader_files() -> tuple[Path] | None:
    """``(jar,)`` if the connector was built, else ``None`` (the native library is inside)."""
    jar = jar_path()
    return None if jar is None else (jar,)


def jvm_reader_conf(existing_jars: str | None = None) -> dict[str, str]:
    """Spark settings that ship the jar explicitly (``spark.jars``), or ``{}`` without one.

    Not needed for the connector to work (see the module docstring); for a builder that
    already sets ``spark.jars``, pass its value to keep it: ``spark.jars`` gets the jar
    appended to ``existing_jars``.

    Example::

        builder = SparkSession.builder.master("local[2]")
        for key, value in jvm_reader_conf().items():
            builder = builder.config(key, value)
    """
    jar = jar_path()
    if jar is None or switched_off():
        return {}
    return {"spark.jars": ",".join(j for j in (existing_jars, str(jar)) if j)}


def add_to_launch_environment(environ: dict[str, str] | None = None) -> bool:
    """Appends the jar to ``SPARK_DIST_CLASSPATH`` in ``environ`` (default ``os.environ``), so
    that the driver JVM of a session started afterwards from this process has the connector.
    Returns whether the jar is on it. Does nothing when :data:`ENV_SWITCH` is off."""
    env = os.environ if environ is None else environ
    jar = jar_path()
    if jar is None or switched_off():
        return False
    entries = [e for e in env.get(_CLASSPATH_ENV, "").split(os.pathsep) if e]
    if str(jar) not in entries:
        env[_CLASSPATH_ENV] = os.pathsep.join([*entries, str(jar)])
    return True


def session_has_connector(spark: SparkSession) -> bool:
    """True if ``format("rocketstore")`` resolves to the JVM connector in ``spark`` (on the
    calling thread: Spark looks classes up in the thread's context class loader)."""
    jvm = spark.sparkContext._jvm
    if jvm is None:
        return False
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        loader.loadClass(PROVIDER_CLASS)
    except Exception:  # py4j's Py4JJavaError: ClassNotFoundException
        return False
    return True


_NOTICES: set[str] = set()


def _notice(reason: str) -> None:
    """Says once per process, in one line on stderr, that the Python data source serves the
    jobs and why."""
    if reason not in _NOTICES:
        _NOTICES.add(reason)
        print(
            f"rocketstore: the Python data source serves format('rocketstore') jobs: {reason}",
            file=sys.stderr,
            flush=True,
        )


def add_to_session(spark: SparkSession) -> bool:
    """Makes ``format("rocketstore")`` take the JVM connector in a running ``spark`` that was
    started without the jar: adds it as ``ADD JAR`` does (to the session's class loader, made
    the calling thread's, and to the jars the executors fetch). Returns whether the session has
    the connector; when it cannot, says why once (the Python data source then serves)."""
    if switched_off():
        _notice(f"the JVM connector is switched off ({ENV_SWITCH}={os.environ[ENV_SWITCH]})")
        return False
    if session_has_connector(spark):
        return True
    jar = jar_path()
    if jar is None:
        _notice(f"this rocketstore has no JVM connector ({JVM_DIR / JAR} was not built)")
        return False
    if spark.sparkContext._jvm is None:
        return False
    try:
        spark._jsparkSession.sessionState().resourceLoader().addJar(str(jar))
    except Exception as exc:  # a JVM error from py4j
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        _notice(f"the JVM connector could not be added to the running session: {first}")
        return False
    return session_has_connector(spark)


def main(argv: list[str] | None = None) -> int:
    """``python -m rocketstore.spark._jvm``: prints the jar's path (for ``--jars``)."""
    del argv
    jar = jar_path()
    if jar is None:
        print(
            f"rocketstore: no JVM connector in this installation ({JVM_DIR / JAR})", file=sys.stderr
        )
        return 1
    print(jar)
    return 0
