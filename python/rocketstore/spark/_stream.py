"""The streaming read side of the ``rocketstore`` Spark data source.

``spark.readStream.format("rocketstore").load(path)`` reads the messages of every store
below ``path`` through their consume queues, like Kafka's source reads partitions.

Offsets are JSON objects ``{"<store>": {"<topic>": {"<queue id>": <next queue offset>}}}``
where ``<store>`` is the store's path relative to ``path`` (``"."`` when ``path`` is a store).
A microbatch reads, for every queue, the queue offsets ``[start, end)``.

* The first batch starts at ``startingOffsets`` (``earliest``, the default, ``latest`` or
  JSON as for the batch reader); a query restarted with the same checkpoint location starts
  where it stopped, so a second run reads only the messages put since.
* Stores and queues that appear later start at their earliest offset.
* ``maxOffsetsPerTrigger`` caps the messages per microbatch (Spark's ``ReadMaxRows`` read
  limit), split over the queues in proportion to their backlog.
* ``trigger(availableNow=True)`` reads what exists when the query starts (in several
  batches if ``maxOffsetsPerTrigger`` is set), then stops.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from rocketstore.exceptions import InvalidConfigError
from rocketstore.spark._options import EARLIEST, LATEST, lookup_offset
from rocketstore.spark._reader import (
    QueueInfo,
    QueuePartition,
    ReadSettings,
    list_queues,
    read_partition,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Offsets", "RocketStoreStreamReader"]

#: ``{store key: {topic: {queue id (str): next queue offset}}}``
Offsets = dict[str, dict[str, dict[str, int]]]


def _get(offsets: Offsets, key: str, topic: str, qid: int) -> int | None:
    return offsets.get(key, {}).get(topic, {}).get(str(qid))


def _set(offsets: Offsets, key: str, topic: str, qid: int, value: int) -> None:
    offsets.setdefault(key, {}).setdefault(topic, {})[str(qid)] = value


def _copy(offsets: Mapping[str, Mapping[str, Mapping[str, int]]]) -> Offsets:
    return {
        k: {t: {q: int(o) for q, o in qs.items()} for t, qs in ts.items()}
        for k, ts in offsets.items()
    }


def _split_budget(backlog: list[tuple[QueueInfo, int, int]], budget: int) -> list[int]:
    """Splits ``budget`` messages over queues in proportion to their backlog (start, end)."""
    sizes = [end - start for _, start, end in backlog]
    total = sum(sizes)
    if total <= budget:
        return sizes
    shares = [size * budget // total for size in sizes]
    left = budget - sum(shares)
    # Hand the remainder out one by one, largest backlog first, so the batch always advances.
    order = sorted(range(len(sizes)), key=lambda i: sizes[i] - shares[i], reverse=True)
    for i in order:
        if left == 0:
            break
        if shares[i] < sizes[i]:
            shares[i] += 1
            left -= 1
    return shares


class RocketStoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Microbatch reader over the consume queues of every store under a path.

    Example::

        query = (
            spark.readStream.format("rocketstore")
            .option("maxOffsetsPerTrigger", 100_000)
            .load("/data/stores")
            .writeStream.format("parquet")
            .option("checkpointLocation", "/data/checkpoints/rs")
            .trigger(availableNow=True)
            .start("/data/out")
        )
        query.awaitTermination()
    """

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        settings = ReadSettings.parse(options, what="stream reader")
        if settings.table != "messages":
            err = InvalidConfigError(
                f"a rocketstore stream reads table=messages, not table={settings.table}"
            )
            err.key = "table"
            raise err
        if settings.ending or settings.ending_timestamp is not None:
            err = InvalidConfigError(
                "endingOffsets/endingTimestamp apply to batch reads; a stream ends where the "
                "queues end (use trigger(availableNow=True) to stop there)"
            )
            err.key = "endingOffsets"
            raise err
        self.settings = settings
        self.schema = schema
        self._target: Offsets | None = None

    # ---- driver side ------------------------------------------------------------------

    def _latest(self) -> Offsets:
        latest: Offsets = {}
        for q in list_queues(self.settings):
            _set(latest, q.key, q.topic, q.queue_id, q.max_offset)
        return latest

    def initialOffset(self) -> dict[str, dict[str, dict[str, int]]]:
        """``startingOffsets`` resolved for every queue that exists now."""
        s = self.settings
        queues = list_queues(s)
        handles = {}
        offsets: Offsets = {}
        try:
            for q in queues:
                spec = lookup_offset(s.starting, s.starting_default, q.key, q.topic, q.queue_id)
                if s.starting_timestamp is not None:
                    if q.store not in handles:
                        handles[q.store] = s.open(q.store)
                    spec = handles[q.store].get_offset_in_queue_by_time(
                        q.topic, q.queue_id, s.starting_timestamp
                    )
                if spec == EARLIEST:
                    value = q.min_offset
                elif spec == LATEST:
                    value = q.max_offset
                else:
                    value = min(max(spec, q.min_offset), q.max_offset)
                _set(offsets, q.key, q.topic, q.queue_id, value)
        finally:
            for h in handles.values():
                h.close()
        return offsets

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)`` if the option is set, else everything."""
        n = self.settings.max_offsets_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Remembers the current end of every queue: an availableNow query stops there."""
        self._target = self._latest()

    def latestOffset(
        self, start: dict[str, dict[str, dict[str, int]]], limit: ReadLimit
    ) -> dict[str, dict[str, dict[str, int]]]:
        """The end offsets of the next microbatch, within ``limit``."""
        queues = list_queues(self.settings)
        begin = _copy(start)
        backlog: list[tuple[QueueInfo, int, int]] = []
        for q in queues:
            first = _get(begin, q.key, q.topic, q.queue_id)
            if first is None:
                first = q.min_offset  # a queue that appeared since: from its start
                _set(begin, q.key, q.topic, q.queue_id, first)
            last = q.max_offset
            if self._target is not None:
                cap = _get(self._target, q.key, q.topic, q.queue_id)
                last = min(last, cap) if cap is not None else first
            backlog.append((q, first, max(first, last)))
        if isinstance(limit, ReadMaxRows):
            shares = _split_budget(backlog, limit.max_rows)
        else:
            shares = [end - first for _, first, end in backlog]
        end = begin
        for (q, first, _), share in zip(backlog, shares, strict=True):
            _set(end, q.key, q.topic, q.queue_id, first + share)
        return end

    def reportLatestOffset(self) -> dict[str, dict[str, dict[str, int]]] | None:
        """The current end of every queue (shown in the query progress)."""
        return self._latest()

    def partitions(
        self, start: dict[str, dict[str, dict[str, int]]], end: dict[str, dict[str, dict[str, int]]]
    ) -> Sequence[InputPartition]:
        """One partition per queue that advanced between ``start`` and ``end``."""
        parts: list[InputPartition] = []
        for key, topics in sorted(end.items()):
            store = self.settings.store_ref(key)
            for topic, queues in sorted(topics.items()):
                for qid, stop in sorted(queues.items(), key=lambda kv: int(kv[0])):
                    first = _get(start, key, topic, int(qid))
                    first = 0 if first is None else first  # read() raises it to the queue's min
                    if stop > first:
                        parts.append(QueuePartition(store, topic, int(qid), first, stop))
        return parts

    def commit(self, end: dict[str, dict[str, dict[str, int]]]) -> None:
        """Nothing to do: the store keeps every message (retention is the store's business)."""

    # ---- executor side ----------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of one queue's offsets ``[start, end)``."""
        return read_partition(self.settings, self.schema, partition)
