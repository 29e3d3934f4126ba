"""PySpark integration: the ``rocketstore`` data source and the ingest/verify jobs.

``format("rocketstore")`` needs no import and no configuration: Spark finds the Python data
source through the ``pyspark_rocketstore`` module when the package is installed where the Python
workers run, and the JVM connector (the jar in the wheel: batch reads and the tasks of batch
writes in the JVM, without the JVM -> Python hop) is put on the driver's classpath of every
session the environment's Python starts (see :mod:`rocketstore.spark._jvm`).
``import rocketstore.spark`` registers the data source on the active SparkSession and adds the
JVM connector to it when it runs without it (:func:`register` does both for any session). Needs
``pip install 'rocketstore[spark]'`` (PySpark 4.3) and Java 17.

Python workers: imported before the SparkContext starts, ``rocketstore.spark`` sets
``PYSPARK_PYTHON`` to this interpreter when it is unset (not under ``spark-submit``), so a
script run as ``.venv/bin/python job.py`` without activating the venv gets workers that import
the same rocketstore. A value already set is kept. When a context already runs workers with an
interpreter that cannot import this rocketstore, :func:`register` registers a stand-in whose
``schema()``/``reader()``/``writer()`` fail on the driver, before any task, with an error
naming that interpreter and what to set (``PYSPARK_PYTHON``, or ``spark.pyspark.python``
with ``spark-submit``).

Example::

    import rocketstore.spark  # registers format "rocketstore"

    df = spark.createDataFrame(
        [("TopicA", b"hello", "TagA", ["order-1"])],
        "topic string, body binary, tags string, keys array<string>",
    )
    df.write.format("rocketstore").mode("append").save("/data/stores")

    back = spark.read.format("rocketstore").load("/data/stores")
    back.select("topic", "queue_id", "queue_offset", "tags", "keys", "body").show()

    (
        spark.readStream.format("rocketstore")
        .load("/data/stores")
        .writeStream.format("parquet")
        .option("checkpointLocation", "/data/ckpt")
        .trigger(availableNow=True)
        .start("/data/out")
        .awaitTermination()
    )

Write: ``df.write.format("rocketstore").mode("append" | "overwrite").save(root)``. Each task
writes one store; ``commit`` publishes them as ``root/store-<n>`` with a ``_SUCCESS`` JSON
manifest (per store: messages, bytes, min/max commit log offsets, counts per topic and queue,
a body digest). Failed, retried and speculative attempts never publish anything. Columns are
``put()``'s argument names: ``topic`` (string) and ``body`` (binary or string) are required;
``queue_id`` (int), ``tags`` (string), ``keys`` (string of space-separated keys or
array<string>), ``properties`` (map<string,string>), ``born_timestamp`` (timestamp or bigint
ms), ``flag`` (int), ``born_host``/``store_host`` ("ip:port"), ``delay_level`` (int),
``transaction`` (string) and ``prepared_transaction_offset`` (bigint) are optional: whatever
``MessageStore.put_batch`` accepts. Any other column fails the job before a task starts.

=====================  =======================================================================
Writer option          Meaning
=====================  =======================================================================
``queueSelector``      ``hash`` (default): a row without ``queue_id`` goes to queue
                       ``crc32(utf8(keys joined by " ")) % queueNums``; rows without keys go
                       round robin. ``round_robin``: every row without ``queue_id`` goes
                       round robin (a per-task counter starting at the partition id).
``queueNums``          Number of queues per topic for the selector (default 4, RocketMQ's
                       ``defaultTopicQueueNums``).
``compressionType``    ``none`` (default), ``lz4``, ``zstd`` or ``zlib``: compress bodies of at
                       least ``compressOver`` bytes (default 4096) at ``compressLevel``
                       (default 5) as a RocketMQ producer does.
store configuration    Any keyword of :func:`rocketstore.config_fields`, in RocketMQ's
                       camelCase or snake_case, e.g. ``mappedFileSizeCommitLog``/
                       ``mapped_file_size_commit_log``, ``flushDiskType``, ``maxMessageSize``.
=====================  =======================================================================

Read: ``spark.read.format("rocketstore").load(path)``, where ``path`` is one store (a
directory with ``commitlog/``) or a directory searched recursively for stores (``_*`` and
``.*`` directories such as ``_temporary`` are skipped). Stores are opened read-only: reading
never changes a byte. Rows are built in Rust as Arrow batches.

=======================  =====================================================================
Reader option            Meaning
=======================  =====================================================================
``table``                ``messages`` (default): the columns of ``rocketstore.MESSAGE_SCHEMA``
                         plus ``store`` (the store's path), timestamps as Spark timestamps.
                         ``consumequeue``: one row per consume queue unit (``topic, queue_id,
                         queue_offset, commitlog_offset, size, tags_code, store``).
                         ``index``: one row per index file entry.
``partitioning``         ``file``: one partition per commit log file, every record in the
                         files in commit log order (default for a full read). ``queue``: one
                         partition per (store, topic, queue), read through the consume queue
                         (default when ``topics``, offsets or timestamps are given).
``topics``               Comma-separated topics to read (all if absent).
``startingOffsets``      ``earliest`` (default), ``latest`` or JSON ``{"TopicA": {"0": 23}}``
                         (queue offsets; -2 earliest, -1 latest; unlisted queues use the
                         default); ``{"store-00000": {"TopicA": {"0": 23}}}`` names stores by
                         path relative to the load path (``"."`` for the path itself).
``endingOffsets``        Same form; exclusive; ``latest`` (default).
``startingTimestamp``    Epoch ms: each queue starts at its first message stored at or after
                         it (``get_offset_in_queue_by_time``); overrides ``startingOffsets``.
``endingTimestamp``      Epoch ms: each queue ends before its first message stored at or after
                         it.
``verifyCrc``            ``true``: check every body CRC; a mismatch fails the task with
                         ``CorruptionError`` naming file and offset. Default ``false``.
``maxMessagesPerBatch``  Rows per Arrow batch (default 16384).
``maxOffsetsPerTrigger`` Streaming only: messages per microbatch over all queues.
store configuration      Not needed for the geometry (file sizes, index slots and entries):
                         it comes from each store's files; a value given that contradicts
                         them is refused before any task runs.
=======================  =====================================================================

Bodies are read as stored, with their ``sys_flag``; :func:`decompressed` turns a DataFrame
of messages into the bodies a RocketMQ consumer sees (compressed ones decompressed).

Stream: ``spark.readStream.format("rocketstore").load(path)`` with the reader's options
(``table=messages`` only; no ending offsets). Offsets are per (store, topic, queue):
``{"store-00000": {"TopicA": {"0": 42}}}``. ``trigger(availableNow=True)`` reads what exists
when the query starts and stops; a restart with the same checkpoint reads only newer messages.

Stream sink: ``df.writeStream.format("rocketstore").option("checkpointLocation", c).start(root)``
appends every micro-batch, exactly once, to ``stores`` (option, default 4) long-lived stores
``root/store-<n>``; readers see each store up to its last committed micro-batch. Expired commit
log files are deleted after ``fileReservedTime`` hours (default 72). See ``docs/spark.md``.

Jobs: :func:`ingest` writes a DataFrame into ``N`` stores and :func:`verify` checks a root
(CRC, framing, consume queues, index, manifest, and optionally equality with the source).
:func:`verify_local` runs the same per-store checks without Spark (threads in this process);
it is the one name here that needs no PySpark (``pip install rocketstore`` is enough).
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

# The checks without Spark need no PySpark: `pip install rocketstore` alone can run them.
from rocketstore.spark.verify import verify, verify_local


def _pyspark_missing() -> str | None:
    """Why the Spark names are missing (PySpark is not installed), or None."""
    try:
        found = find_spec("pyspark") is not None
    except (ImportError, ValueError):  # a broken or blocked (sys.modules entry None) install
        found = False
    if found:
        return None
    return (
        "needs PySpark: pip install 'rocketstore[spark]' (and Java 17+); "
        "rocketstore.spark.verify_local runs the per-store checks without it"
    )


_NO_PYSPARK = _pyspark_missing()

if _NO_PYSPARK is None:
    from rocketstore.spark._bodies import decompressed
    from rocketstore.spark._ingest import ingest
    from rocketstore.spark._interpreter import default_worker_python
    from rocketstore.spark._reader import CONSUME_QUEUE_SCHEMA, INDEX_SCHEMA, MESSAGE_SCHEMA
    from rocketstore.spark._source import RocketStoreDataSource, register
    from rocketstore.spark._writer import MANIFEST, body_digest

__all__ = [
    "CONSUME_QUEUE_SCHEMA",
    "INDEX_SCHEMA",
    "MANIFEST",
    "MESSAGE_SCHEMA",
    "RocketStoreDataSource",
    "body_digest",
    "decompressed",
    "ingest",
    "register",
    "verify",
    "verify_local",
]


def __getattr__(name: str) -> Any:
    # Without PySpark only verify_local (and verify's module) can be imported.
    if _NO_PYSPARK is not None and name in __all__:
        raise ImportError(f"rocketstore.spark.{name} {_NO_PYSPARK}", name=name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _register_on_active_session() -> None:
    """Registers the source on the session of this process, if there is one (not on workers);
    before any session, puts the JVM connector on the classpath of the JVM that will start."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from rocketstore.spark._jvm import add_to_launch_environment

    spark = SparkSession.getActiveSession()
    if spark is not None:
        register(spark)
    elif SparkContext._gateway is None:  # no JVM yet (not a worker, not under spark-submit)
        add_to_launch_environment()


if _NO_PYSPARK is None:
    default_worker_python()
    _register_on_active_session()
