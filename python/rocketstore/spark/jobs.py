"""Bulk jobs on Spark, gathered under their former import path.

:func:`ingest` lives in :mod:`rocketstore.spark._ingest`, :func:`demo_messages` in
:mod:`rocketstore.spark._demo`, the checks (:func:`verify`, :func:`verify_local`,
:func:`verify_store`) in :mod:`rocketstore.spark.verify` and :func:`read_manifest` in
:mod:`rocketstore._stores`; this module re-exports them.

Example::

    from rocketstore.spark import ingest, verify

    summary = ingest(df, "/data/stores", stores=8, mode="overwrite")
    report = verify(spark, "/data/stores", expected=df, report_path="/tmp/verify.json")
    assert report.ok, report.failed_checks
"""

from __future__ import annotations

from rocketstore._stores import read_manifest
from rocketstore.spark._demo import DEMO_TOPICS, demo_messages
from rocketstore.spark._ingest import PUT_COLUMNS, ingest
from rocketstore.spark._report import Check, VerifyReport
from rocketstore.spark.verify import STORE_CHECKS, verify, verify_local, verify_store

__all__ = [
    "DEMO_TOPICS",
    "PUT_COLUMNS",
    "STORE_CHECKS",
    "Check",
    "VerifyReport",
    "demo_messages",
    "ingest",
    "read_manifest",
    "verify",
    "verify_local",
    "verify_store",
]
