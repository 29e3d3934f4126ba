"""The ``rocketstore`` Spark data source class and its registration."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from rocketstore.spark._interpreter import checked_source
from rocketstore.spark._jvm import add_to_session, session_has_connector
from rocketstore.spark._reader import RocketStoreReader, schema_for
from rocketstore.spark._stream import RocketStoreStreamReader
from rocketstore.spark._stream_writer import RocketStoreStreamWriter
from rocketstore.spark._writer import RocketStoreWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["RocketStoreDataSource", "ensure_registered", "register"]


class RocketStoreDataSource(DataSource):
    """PySpark data source ``rocketstore``: RocketMQ store roots as DataFrames.

    Registered by ``import rocketstore.spark`` (on the active session), by
    :func:`register`, or automatically by Spark through the ``pyspark_rocketstore`` module.
    See :mod:`rocketstore.spark` for the options.

    Example::

        import rocketstore.spark  # registers the data source on the active session

        df.write.format("rocketstore").mode("append").save("/data/stores")
        back = spark.read.format("rocketstore").load("/data/stores")
        stream = spark.readStream.format("rocketstore").load("/data/stores")
        df.writeStream.format("rocketstore").option("checkpointLocation", "/ckpt").start("/s")
    """

    @classmethod
    def name(cls) -> str:
        """The format name: ``rocketstore``."""
        return "rocketstore"

    def schema(self) -> StructType:
        """The schema of the table the ``table`` option selects (``messages`` by default)."""
        return schema_for(self.options)

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch reader (``spark.read``)."""
        return RocketStoreReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """A batch writer (``df.write``), one store per task, published on commit."""
        return RocketStoreWriter(self.options, schema, overwrite)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A microbatch stream reader (``spark.readStream``)."""
        return RocketStoreStreamReader(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """A microbatch stream writer (``df.writeStream``): each batch appended exactly once to
        the fixed set of stores under the root."""
        return RocketStoreStreamWriter(self.options, schema)


def register(spark: SparkSession | None = None) -> None:
    """Registers the ``rocketstore`` data source on ``spark`` (default: the active session),
    and adds the JVM connector to it if it runs without it
    (:func:`rocketstore.spark._jvm.add_to_session`).

    Example::

        from pyspark.sql import SparkSession

        from rocketstore.spark import register

        spark = SparkSession.builder.getOrCreate()
        register(spark)
        spark.read.format("rocketstore").load("/data/stores").count()
    """
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError("no active SparkSession to register the rocketstore source on")
    # A stand-in that fails with a clear error when the workers' interpreter lacks rocketstore.
    try:
        spark.dataSource.register(checked_source(spark, RocketStoreDataSource))
    except Exception as e:
        # With the JVM connector in the session, `rocketstore` names its JVM source, and Spark
        # refuses a Python source of the same name: the connector serves the format (and hands
        # what it does not serve to the Python source Spark discovered, pyspark_rocketstore).
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e) or not session_has_connector(spark):
            raise
    # The JVM connector, when the session runs without it (started before the jar was put on
    # its classpath): batch reads and write tasks in the JVM.
    add_to_session(spark)


_REGISTERED: weakref.WeakSet[SparkSession] = weakref.WeakSet()


def ensure_registered(spark: SparkSession) -> None:
    """Registers the data source on ``spark`` once (registering again logs a warning)."""
    if spark in _REGISTERED:
        return
    register(spark)
    _REGISTERED.add(spark)
