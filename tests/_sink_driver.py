"""Drives the stream sink's real protocol (``RocketStoreStreamWriter.write`` on the tasks'
side, ``commit`` on the driver's) without a streaming query: a test names the query, run,
batch and partition each task would get from Spark's ``TaskContext``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from rocketstore.spark import _stream_writer
from rocketstore.spark._stream_writer import RocketStoreStreamWriter, SinkTaskMessage

SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("body", StringType()),
        StructField("keys", StringType()),
    ]
)


def rows(tag: str, n: int) -> list[str]:
    """The bodies of ``n`` rows tagged ``tag``."""
    return [f"{tag}-{i}" for i in range(n)]


def _batch(bodies: Sequence[str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "topic": ["Orders"] * len(bodies),
            "body": list(bodies),
            "keys": [f"key-{b}" for b in bodies],
        }
    )


class SinkDriver:
    """One query writing micro-batches into a sink root through the sink's own code."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, root: str, query: str = "q1", **options: str
    ) -> None:
        self.monkeypatch = monkeypatch
        self.query, self.run = query, "run-1"
        self.writer = RocketStoreStreamWriter({"path": root, **options}, SCHEMA)

    def task(self, batch: int, partition: int, bodies: Sequence[str]) -> SinkTaskMessage:
        """Runs one write task (attempt 0) of ``batch`` on ``partition``."""
        ident = (self.query, self.run, batch, partition, 0)
        self.monkeypatch.setattr(_stream_writer, "_stream_identity", lambda: ident)

        def it() -> Iterator[Any]:
            yield _batch(bodies)

        msg = self.writer.write(it())
        assert isinstance(msg, SinkTaskMessage)
        return msg

    def batch(self, batch: int, parts: Sequence[Sequence[str]]) -> None:
        """Runs every task of ``batch`` (one per entry of ``parts``) and commits it."""
        msgs = [self.task(batch, p, bodies) for p, bodies in enumerate(parts)]
        self.writer.commit(list(msgs), batch)
