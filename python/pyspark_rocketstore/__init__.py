"""Automatic registration of the ``rocketstore`` PySpark data source.

PySpark (4.0+) imports every top-level module whose name starts with ``pyspark_`` when a
session first resolves a Python data source, and registers the ``DefaultSource`` class it
finds there under its ``name()``. So when rocketstore is installed in the Python environment
Spark uses, ``spark.read.format("rocketstore")`` works without ``import rocketstore.spark``.
"""

from __future__ import annotations

from rocketstore.spark._source import RocketStoreDataSource as DefaultSource

__all__ = ["DefaultSource"]
