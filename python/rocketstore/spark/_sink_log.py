"""The streaming sink's progress records, kept inside each store it appends to.

Every store the sink writes (``<root>/store-<n>``) holds, besides the rows, small JSON records in
the reserved topic :data:`MARKER_TOPIC` (RocketMQ treats ``rmq_sys_*`` topics as system topics:
a broker loads and keeps them, producers and ordinary consumers leave them alone):

* queue :data:`TASK_QUEUE` (1): one **task record** after the rows of each write task, appended
  and flushed with them: ``{"kind": "task", "query", "run", "batch", "partition", "attempt",
  "messages"}``;
* queue :data:`COMMIT_QUEUE` (0): one **commit record** per micro-batch, appended by the driver
  once every task of the batch has written: ``{"kind": "commit", "query", "batch", "end",
  "queues", "queries", "messages"}``. ``end`` is the commit log offset where the batch's data
  ends (the record itself starts there), ``queues`` every queue's next offset at that point
  (``{topic: {queue id: next offset}}``), ``queries`` the last committed batch of every query
  that ever wrote the store (Delta Lake's transaction identifiers: app id and version) and
  ``messages`` the rows the store holds from committed batches.

What a reader may see is what the last commit record covers: a queue's messages below its
``queues`` offset. Whatever lies past it (rows and task records of a batch not yet committed, or
of an attempt that died) is invisible to the ``rocketstore`` readers, and is cut away by the next
writer before it appends (``rocketstore.truncate_store``).

Expired-file cleanup (``fileReservedTime``) deletes old commit log files with the records in
them. The newest commit record always lies in the store's last file when it is written; it can
only be deleted if rows that were never committed follow it into later files and then outlive
the reserved time. So the driver also keeps a copy of the last commit record in
:data:`COMMIT_FILE` inside the store (written atomically after the record is flushed), which
:func:`last_commit` falls back to when the record itself is gone: the exactly-once bookkeeping
survives any cleanup.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocketstore import MessageStore

__all__ = [
    "COMMIT_FILE",
    "COMMIT_QUEUE",
    "MARKER_TOPIC",
    "TASK_QUEUE",
    "Commit",
    "TaskRecord",
    "last_commit",
    "put_commit",
    "put_task",
    "save_commit",
    "tasks_since",
]

#: The reserved topic of the sink's progress records (a RocketMQ system topic by its prefix).
MARKER_TOPIC = "rmq_sys_rocketstore_sink"
#: Queue of the commit records (one per committed micro-batch).
COMMIT_QUEUE = 0
#: Queue of the task records (one per write task that appended rows).
TASK_QUEUE = 1
#: File in a sink's store with a copy of its last commit record (JSON, :class:`Commit`'s fields).
COMMIT_FILE = "rocketstore_sink_commit.json"


@dataclass(frozen=True)
class Commit:
    """A commit record: what a store holds of committed micro-batches."""

    query: str
    batch: int
    end: int  # where the batch's data ends (the commit record starts here)
    after: int  # one past the commit record
    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    queries: dict[str, int] = field(default_factory=dict)
    messages: int = 0

    def committed(self, query: str, batch: int) -> bool:
        """True if ``batch`` of ``query`` (or a later one) is committed in this store."""
        return self.queries.get(query, -1) >= batch

    def cap(self, topic: str, queue_id: int) -> int:
        """The queue's end as of this commit (0 for a queue it does not list)."""
        return int(self.queues.get(topic, {}).get(str(queue_id), 0))


@dataclass(frozen=True)
class TaskRecord:
    """A task record: one write task's rows end just before it."""

    query: str
    run: str
    batch: int
    partition: int
    attempt: int
    messages: int
    offset: int  # where the record starts
    after: int  # one past it


def _decode(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _records(store: MessageStore, queue_id: int, offset: int, count: int) -> list[Any]:
    return list(store.get_message(MARKER_TOPIC, queue_id, offset, count).messages)


def last_commit(store: MessageStore) -> Commit | None:
    """The store's last commit record, or None if it has none (a store no batch committed).

    Read from the commit log; if cleanup deleted the file that held it, from the copy in
    :data:`COMMIT_FILE` (whichever is later if both exist)."""
    logged = _logged_commit(store)
    saved = _saved_commit(store.path)
    if saved is None or (logged is not None and logged.after >= saved.after):
        return logged
    return saved


def _saved_commit(path: str | os.PathLike[str]) -> Commit | None:
    try:
        with open(os.path.join(path, COMMIT_FILE), encoding="utf-8") as f:
            d = json.load(f)
        return Commit(
            query=str(d["query"]),
            batch=int(d["batch"]),
            end=int(d["end"]),
            after=int(d["after"]),
            queues={
                str(t): {str(q): int(o) for q, o in qs.items()}
                for t, qs in dict(d.get("queues") or {}).items()
            },
            queries={str(k): int(v) for k, v in dict(d.get("queries") or {}).items()},
            messages=int(d.get("messages", 0)),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save_commit(store: MessageStore) -> None:
    """Copies the store's last commit record (flushed) into :data:`COMMIT_FILE`, atomically
    (temporary file, fsync, rename, fsync of the directory)."""
    commit = _logged_commit(store)
    if commit is None:
        return
    path = os.path.join(store.path, COMMIT_FILE)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"version": 1, **asdict(commit)}, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    with contextlib.suppress(OSError):
        fd = os.open(store.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _logged_commit(store: MessageStore) -> Commit | None:
    n = store.max_offset_in_queue(MARKER_TOPIC, COMMIT_QUEUE)
    if n <= 0 or n - 1 < store.min_offset_in_queue(MARKER_TOPIC, COMMIT_QUEUE):
        return None
    try:
        found = _records(store, COMMIT_QUEUE, n - 1, 1)
    except Exception:  # its file was deleted under the queue: the saved copy answers
        return None
    if not found:
        return None
    m = found[0]
    d = _decode(m.body)
    return Commit(
        query=str(d.get("query", "")),
        batch=int(d.get("batch", -1)),
        end=int(d.get("end", m.commitlog_offset)),
        after=m.commitlog_offset + m.store_size,
        queues={
            str(t): {str(q): int(o) for q, o in qs.items()}
            for t, qs in dict(d.get("queues") or {}).items()
        },
        queries={str(k): int(v) for k, v in dict(d.get("queries") or {}).items()},
        messages=int(d.get("messages", 0)),
    )


def tasks_since(store: MessageStore, offset: int) -> list[TaskRecord]:
    """The task records at or after commit log ``offset``, in commit log order."""
    hi = store.max_offset_in_queue(MARKER_TOPIC, TASK_QUEUE)
    lo = store.min_offset_in_queue(MARKER_TOPIC, TASK_QUEUE)
    out: list[TaskRecord] = []
    i = hi - 1
    while i >= lo:
        start = max(lo, i - 31)
        chunk = _records(store, TASK_QUEUE, start, i - start + 1)
        done = False
        for m in reversed(chunk):
            if m.commitlog_offset < offset:
                done = True
                break
            d = _decode(m.body)
            out.append(
                TaskRecord(
                    query=str(d.get("query", "")),
                    run=str(d.get("run", "")),
                    batch=int(d.get("batch", -1)),
                    partition=int(d.get("partition", -1)),
                    attempt=int(d.get("attempt", -1)),
                    messages=int(d.get("messages", 0)),
                    offset=m.commitlog_offset,
                    after=m.commitlog_offset + m.store_size,
                )
            )
        if done or not chunk:
            break
        i = start - 1
    out.reverse()
    return out


def _put(store: MessageStore, queue_id: int, tag: str, key: str, body: dict[str, Any]) -> int:
    text = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    r = store.put(MARKER_TOPIC, text, queue_id=queue_id, tags=tag, keys=[key])
    if not r.ok:
        raise OSError(f"rocketstore stream sink: writing its {tag} record failed: {r.status}")
    return int(r.commitlog_offset)


def put_task(
    store: MessageStore,
    *,
    query: str,
    run: str,
    batch: int,
    partition: int,
    attempt: int,
    messages: int,
) -> int:
    """Appends a task record (not flushed); returns its commit log offset."""
    body = {
        "kind": "task",
        "query": query,
        "run": run,
        "batch": batch,
        "partition": partition,
        "attempt": attempt,
        "messages": messages,
    }
    return _put(store, TASK_QUEUE, "task", f"{query}:{batch}:{partition}", body)


def data_queues(store: MessageStore) -> dict[str, dict[str, int]]:
    """Every queue's next offset, the sink's own topic left out."""
    out: dict[str, dict[str, int]] = {}
    for topic, qid, nxt in store.queue_offsets():
        if topic != MARKER_TOPIC:
            out.setdefault(topic, {})[str(qid)] = int(nxt)
    return out


def put_commit(
    store: MessageStore,
    previous: Commit | None,
    *,
    query: str,
    batch: int,
    messages: int,
) -> int:
    """Appends the commit record of ``batch`` at the store's end (not flushed)."""
    queries = dict(previous.queries) if previous is not None else {}
    queries[query] = batch
    body = {
        "kind": "commit",
        "version": 1,
        "query": query,
        "batch": batch,
        "end": store.max_commitlog_offset(),
        "queues": data_queues(store),
        "queries": queries,
        "messages": (previous.messages if previous is not None else 0) + messages,
        "committed_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
    }
    return _put(store, COMMIT_QUEUE, "commit", f"{query}:{batch}", body)


def is_sink_store(store: Path) -> bool:
    """True if ``store`` holds the stream sink's progress records: readers see it only up to
    its last committed micro-batch, without the sink's own topic. Needs no PySpark."""
    return (store / "consumequeue" / MARKER_TOPIC).is_dir()
