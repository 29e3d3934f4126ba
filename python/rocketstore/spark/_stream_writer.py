"""The streaming sink of the ``rocketstore`` data source: exactly-once stores per micro-batch.

``df.writeStream.format("rocketstore").option("checkpointLocation", ckpt).start(root)`` writes
each micro-batch like the batch writer (one store per task, from Arrow batches, under
``<root>/_temporary``) and publishes it on the driver's commit as **one directory**,
``<root>/<streamId>-batch-<batch id, 10 digits>/store-<n>``, by a single rename:

1. every task's store is renamed into ``<root>/_temporary/<run>/batch-<id>/store-<n>`` and the
   batch's manifest entries are written beside them (``_BATCH``, JSON, fsynced);
2. that directory is renamed to ``<root>/<streamId>-batch-<id>``: this rename is the commit
   point: before it, readers see nothing of the batch; after it, all of it;
3. the root's ``_SUCCESS`` manifest gets the batch's stores and, under ``streams``, the
   stream's last committed batch id (``{"<streamId>": {"batch_id": 7, ...}}``).

A micro-batch that Spark runs again after a restart (its commit was not recorded in the
checkpoint) finds its directory, or a batch id at or below the manifest's, and publishes
nothing again: each source row is stored exactly once. If the driver died between steps 2 and
3, the replay adds the batch's ``_BATCH`` entries to the manifest. A batch whose tasks fail is
aborted: its stores stay under ``_temporary`` and are deleted; nothing of it is published.

Options: those of the batch writer (``queueSelector``, ``queueNums``, store configuration) and
``streamId`` (default ``stream``: letters, digits, ``-`` and ``_``), which names the batch
directories and the manifest's progress entry; streams writing into the same root need
distinct ids.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from rocketstore._stores import TEMPORARY
from rocketstore.exceptions import InvalidConfigError
from rocketstore.spark._options import normalize
from rocketstore.spark._writer import (
    RocketStoreWriter,
    StoreCommitMessage,
    _fsync_dir,
    _remove_tree,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["BATCH_MANIFEST", "RocketStoreStreamWriter", "batch_dir_name"]

#: The per-batch manifest inside a published batch directory.
BATCH_MANIFEST = "_BATCH"
_STREAM_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")
#: Options of the streaming sink that are not the batch writer's.
_STREAM_OPTIONS = ("streamid", "checkpointlocation", "queryname")


def batch_dir_name(stream_id: str, batch_id: int) -> str:
    """The directory a micro-batch is published as, e.g. ``stream-batch-0000000007``."""
    return f"{stream_id}-batch-{batch_id:010d}"


class RocketStoreStreamWriter(DataSourceStreamArrowWriter):
    """Writes each micro-batch's tasks into stores; ``commit`` publishes them exactly once.

    Created on the driver by ``df.writeStream.format("rocketstore")`` (see the module docs).

    Example::

        (
            events.writeStream.format("rocketstore")
            .option("checkpointLocation", "/data/ckpt")
            .option("streamId", "orders")
            .start("/data/stores")
        )
    """

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        own = {normalize(k): v for k, v in options.items() if normalize(k) in _STREAM_OPTIONS}
        stream_id = own.get("streamid", "stream")
        if not _STREAM_ID.match(stream_id):
            err = InvalidConfigError(
                f"option 'streamId' must be 1-100 letters, digits, '-' or '_' (starting with a "
                f"letter or digit), not {stream_id!r}"
            )
            err.key = "streamId"
            raise err
        self.stream_id = stream_id
        rest = {k: v for k, v in options.items() if normalize(k) not in _STREAM_OPTIONS}
        self.writer = RocketStoreWriter(rest, schema, overwrite=False, live_marker=False)
        # Task attempts write under _temporary/<streamId>-<uuid> (Spark may create several
        # writer instances per query: one plans, copies write, another commits).
        self.writer.job_id = f"{stream_id}-{uuid.uuid4().hex}"

    @property
    def root(self) -> str:
        """The store root."""
        return self.writer.root

    # ---- executor side ----------------------------------------------------------------

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StoreCommitMessage:  # type: ignore[override]
        """Writes this task's rows of the micro-batch into a fresh store (executor side)."""
        return self.writer.write(iterator)

    # ---- driver side ------------------------------------------------------------------

    def _committed(self, batch_id: int) -> bool:
        """True if ``batch_id`` of this stream is already published."""
        published = Path(self.root) / batch_dir_name(self.stream_id, batch_id)
        if published.is_dir():
            self._repair_manifest(published)
            return True
        last = self.writer._existing_streams().get(self.stream_id)
        return isinstance(last, dict) and int(last.get("batch_id", -1)) >= batch_id

    def _repair_manifest(self, published: Path) -> None:
        """Adds a published batch to the manifest if the driver died before it did."""
        root = Path(self.root)
        kept = self.writer._existing_manifest()
        listed = {str(e.get("path")) for e in kept}
        try:
            batch = json.loads((published / BATCH_MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        entries = [e for e in batch.get("stores", []) if str(e.get("path")) not in listed]
        if not entries:
            return
        streams = self.writer._existing_streams()
        streams[self.stream_id] = batch.get("stream", {})
        with contextlib.suppress(OSError):
            self.writer._write_manifest(kept + entries, streams)
        _fsync_dir(root)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Publishes the micro-batch as one directory, unless it already was (driver side)."""
        root = Path(self.root)
        ours: list[StoreCommitMessage] = []
        for m in messages:
            if not isinstance(m, StoreCommitMessage):
                raise RuntimeError(
                    f"rocketstore stream writer: commit got {type(m).__name__} instead of a "
                    "StoreCommitMessage; nothing was published"
                )
            ours.append(m)
        root.mkdir(parents=True, exist_ok=True)
        if self._committed(batchId):  # a replay after a restart: already stored once
            self._cleanup()
            return
        name = batch_dir_name(self.stream_id, batchId)
        staging = self.writer.job_dir / f"batch-{batchId}"
        _remove_tree(staging)
        staging.mkdir(parents=True)
        progress = {
            "batch_id": batchId,
            "committed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        entries: list[dict[str, Any]] = []
        index = 0
        for m in sorted(ours, key=lambda m: m.partition):
            if m.path is None:
                continue
            os.rename(m.path, staging / f"store-{index:05d}")
            entries.append(
                {
                    "path": f"{name}/store-{index:05d}",
                    "job_id": self.writer.job_id,
                    "stream": self.stream_id,
                    "batch_id": batchId,
                    "partition": m.partition,
                    "task_attempt": m.task_attempt,
                    **m.stats,
                    "config": dict(sorted(self.writer.config.items())),
                }
            )
            index += 1
        with (staging / BATCH_MANIFEST).open("w", encoding="utf-8") as f:
            json.dump({"stream": progress, "stores": entries}, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(staging)
        os.rename(staging, root / name)  # the commit point
        _fsync_dir(root)
        streams = self.writer._existing_streams()
        streams[self.stream_id] = progress
        self.writer._write_manifest(self.writer._existing_manifest() + entries, streams)
        self._cleanup()

    def _cleanup(self) -> None:
        """Deletes everything this stream has under ``_temporary``.

        Micro-batches of one stream run one at a time, so at a commit or an abort every
        attempt directory of the stream is either published or garbage (a failed or
        speculative attempt, a batch that failed, a run that was killed).
        """
        temporary = Path(self.root) / TEMPORARY
        if temporary.is_dir():
            for old in temporary.glob(f"{self.stream_id}-*"):
                _remove_tree(old)
        with contextlib.suppress(OSError):  # only if no other job is running
            temporary.rmdir()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Deletes every store this micro-batch's tasks wrote; publishes nothing."""
        self._cleanup()
