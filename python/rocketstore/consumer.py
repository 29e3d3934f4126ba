"""``rocketstore.Consumer``: consumer groups over a store that another process writes.

A consumer opens the store read-only and follows its writer (the writer publishes its progress
in ``<root>/rocketstore.progress``; readers wait on it in the kernel, without CPU). Consumers
of one *group* on this machine split the subscribed topics' queues between them, RocketMQ's way
(``AllocateMessageQueueAveragely``, topic by topic, over the members sorted by id), and
rebalance when a member joins, leaves or dies: each member holds an exclusive ``flock`` on its
own file under ``<root>/rocketstore.consumers/<group>/``, which the kernel releases when its
process ends however it ends.

Offsets are stored as a RocketMQ broker stores its consumers' offsets:
``config/consumerOffset.json``, ``offsetTable`` keyed ``"<topic>@<group>"`` -> ``{queueId:
offset}`` (the next offset to consume), rewritten atomically (a ``.bak`` copy of the previous
content, a temporary file, ``fsync``, ``rename``, directory ``fsync``) under a lock shared by
every consumer of the store. Delivery is at least once: a queue's consumption restarts at its
committed offset, so the messages a consumer received after its last commit are delivered again
if it dies (or, with ``auto_commit=False``, if it loses the queue before committing them); no
message below a committed offset is skipped except those the store's cleanup deleted.

Example (two processes)::

    # producer.py
    import rocketstore

    rocketstore.set_topic_queue_nums("/data/log", "orders", 4)  # before opening the writer
    with rocketstore.MessageStore("/data/log") as store:
        for i in range(1000):
            store.put("orders", f"order {i}".encode(), keys=[f"order-{i}"])

    # consumer.py (run several: they split the queues)
    import rocketstore

    with rocketstore.Consumer("/data/log", group="billing", topics=["orders"]) as consumer:
        for msg in consumer:  # waits for new messages; Ctrl-C to stop
            print(msg.queue_id, msg.queue_offset, msg.body)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, TypeVar

from rocketstore import _native, _queues
from rocketstore._status import GetMessageStatus
from rocketstore._store import DEFAULT_MAX_BATCH_BYTES, MessageStore, _columns, _projected_schema
from rocketstore.exceptions import InvalidConfigError, StoreClosedError

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Self

    import pyarrow as pa

__all__ = ["Consumer", "allocate_averagely", "read_consumer_offsets"]

#: Directory (under the store root) of the consumer groups' member files and locks.
CONSUMERS_DIR = "rocketstore.consumers"
_GROUP_RE = re.compile(r"^[%|a-zA-Z0-9_-]{1,120}$")
_MEMBER_SUFFIX = ".member"

QueueKey = tuple[str, int]
_T = TypeVar("_T")


def allocate_averagely(
    queues: Sequence[QueueKey], members: Sequence[str], me: str
) -> list[QueueKey]:
    """RocketMQ's ``AllocateMessageQueueAveragely``: ``me``'s share of ``queues`` (sorted) among
    ``members`` (sorted): contiguous ranges, the first ``len(queues) % len(members)`` members
    one queue more.

    Example::

        >>> allocate_averagely([("T", q) for q in range(5)], ["a", "b"], "b")
        [('T', 3), ('T', 4)]
    """
    mq = sorted(queues)
    cids = sorted(members)
    if me not in cids or not mq:
        return []
    index = cids.index(me)
    n, m = len(mq), len(cids)
    mod = n % m
    if n <= m:
        average = 1
    elif mod > 0 and index < mod:
        average = n // m + 1
    else:
        average = n // m
    start = index * average if (mod > 0 and index < mod) else index * average + mod
    count = min(average, n - start)
    return [mq[(start + i) % n] for i in range(max(count, 0))]


# ---- config/consumerOffset.json -------------------------------------------------------------

_UNQUOTED_KEY = re.compile(r"([{,]\s*)(-?\d+)\s*:")


def _parse_offsets(text: str) -> dict[str, dict[int, int]]:
    # RocketMQ (fastjson) writes the queue ids as unquoted numbers: {"T@G":{0:12,1:7}}.
    doc = json.loads(_UNQUOTED_KEY.sub(r'\1"\2":', text))
    table: dict[str, dict[int, int]] = {}
    for key, queues in (doc.get("offsetTable") or {}).items():
        if isinstance(queues, dict):
            table[str(key)] = {
                int(q): int(o)
                for q, o in queues.items()
                if isinstance(o, int) and not isinstance(o, bool)
            }
    return table


def _render_offsets(table: Mapping[str, Mapping[int, int]]) -> str:
    lines = []
    for key in sorted(table):
        queues = ",".join(f"{q}:{table[key][q]}" for q in sorted(table[key]))
        lines.append(f"\t\t{json.dumps(key)}:{{{queues}}}")
    return '{\n\t"offsetTable":{\n' + ",\n".join(lines) + "\n\t}\n}"


def read_consumer_offsets(path: str | os.PathLike[str]) -> dict[str, dict[int, int]]:
    """The ``offsetTable`` of the store's ``config/consumerOffset.json`` (its ``.bak`` copy if
    the file is missing or unreadable): ``{"<topic>@<group>": {queue_id: offset}}``.

    Example::

        offsets = rocketstore.read_consumer_offsets("/data/log")
        offsets.get("orders@billing", {})
    """
    base = os.path.join(os.fspath(path), "config", "consumerOffset.json")
    for p in (base, base + ".bak"):
        try:
            with open(p, encoding="utf-8") as f:
                text = f.read()
            if text.strip():
                return _parse_offsets(text)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            continue
    return {}


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: str, text: str) -> None:
    tmp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class _OffsetFile:
    """Read-modify-write of ``config/consumerOffset.json`` under an exclusive lock."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.config = os.path.join(root, "config")
        self.path = os.path.join(self.config, "consumerOffset.json")
        self.lock_path = os.path.join(root, CONSUMERS_DIR, "offsets.lock")

    def read(self) -> dict[str, dict[int, int]]:
        return read_consumer_offsets(self.root)

    def update(self, group: str, offsets: Mapping[QueueKey, int]) -> None:
        if not offsets:
            return
        os.makedirs(self.config, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            table = self.read()
            for (topic, qid), off in offsets.items():
                table.setdefault(f"{topic}@{group}", {})[qid] = off
            try:
                with open(self.path, encoding="utf-8") as f:
                    old = f.read()
            except FileNotFoundError:
                old = None
            if old is not None and old.strip():
                # RocketMQ's MixAll.string2File keeps the previous content as <file>.bak.
                _write_atomically(self.path + ".bak", old)
            _write_atomically(self.path, _render_offsets(table))
            _fsync_dir(self.config)
        finally:
            os.close(fd)


# ---- group membership -----------------------------------------------------------------------


class _Membership:
    """This process's member file in ``<root>/rocketstore.consumers/<group>/``, flock-held."""

    def __init__(self, root: str, group: str, member_id: str) -> None:
        self.dir = os.path.join(root, CONSUMERS_DIR, group)
        self.member_id = member_id
        self.path = os.path.join(self.dir, member_id + _MEMBER_SUFFIX)
        self.fd: int | None = None
        self.dir_mtime = -1

    def join(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        tmp = os.path.join(self.dir, f".{self.member_id}.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
            # Locked before it is visible: nobody can take it for a dead member's file.
            os.rename(tmp, self.path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self.fd = fd

    def leave(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self.fd)
        self.fd = None

    def changed(self) -> bool:
        """Whether the directory changed (a member joined, left or was reaped) since the last
        :meth:`members`."""
        try:
            return os.stat(self.dir).st_mtime_ns != self.dir_mtime
        except OSError:
            return True

    def members(self) -> list[str]:
        """Live members, sorted; the files of dead ones (their lock is free) are removed."""
        with contextlib.suppress(OSError):
            self.dir_mtime = os.stat(self.dir).st_mtime_ns
        alive = []
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            names = []
        for name in names:
            if not name.endswith(_MEMBER_SUFFIX):
                continue
            mid = name[: -len(_MEMBER_SUFFIX)]
            if mid == self.member_id:
                alive.append(mid)
                continue
            path = os.path.join(self.dir, name)
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    alive.append(mid)
                os.close(fd)
                continue
            # Its owner is gone (the kernel released its lock): reap it while holding the lock.
            with contextlib.suppress(OSError):
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    os.unlink(path)
            os.close(fd)
        if self.fd is not None and self.member_id not in alive:
            alive.append(self.member_id)
        return sorted(alive)


# ---- the consumer ---------------------------------------------------------------------------


class Consumer:
    """A member of consumer group ``group`` reading ``topics`` from the store at ``path``.

    The store is opened read-only (it may be written by another process, which the consumer
    follows) and the group's members on this machine split the topics' queues (see the module
    documentation). A topic's queues are its ``writeQueueNums`` in ``config/topics.json`` (one
    for a topic the file does not list, see :func:`rocketstore.set_topic_queue_nums`) plus any
    other queue of the topic the store holds.

    Arguments:

    * ``auto_commit`` (default ``True``): offsets of the messages returned so far are committed
      by :meth:`poll`/:meth:`poll_batch`/:meth:`poll_arrow` every ``auto_commit_interval_ms``
      (default 1000), when the consumer loses a queue in a rebalance, and on :meth:`close`: a
      message counts as processed once the next poll is called (Kafka's rule). With ``False``,
      call :meth:`commit`.
    * ``start_from``: where a queue with no committed offset starts, ``"earliest"`` (default:
      its first message still stored) or ``"latest"`` (its end).
    * ``tags``: a tag expression (``"TagA || TagB"``, default every message).
    * ``member_id``: this member's id (default ``<host>@<pid>@<random>``); members are sorted
      by id to split the queues.
    * ``rebalance_interval_ms`` (default 1000): how often the members' locks are probed for a
      dead member (a join or a clean leave is seen at the next poll).
    * ``config``: store settings, as for :class:`MessageStore`.

    Example::

        with rocketstore.Consumer("/data/log", group="billing", topics=["orders"]) as c:
            while True:
                batch = c.poll_batch(max_messages=100, timeout=1.0)
                for msg in batch:
                    handle(msg.body)

    A consumer belongs to the thread that uses it (it is not thread-safe) and to its process.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        group: str,
        topics: Iterable[str],
        *,
        auto_commit: bool = True,
        auto_commit_interval_ms: int = 1000,
        start_from: Literal["earliest", "latest"] = "earliest",
        tags: str | None = None,
        member_id: str | None = None,
        rebalance_interval_ms: int = 1000,
        **config: int | bool | str,
    ) -> None:
        group_arg: object = group
        if not isinstance(group_arg, str) or not _GROUP_RE.match(group_arg):
            raise InvalidConfigError(
                f"group must be 1 to 120 characters of [%|a-zA-Z0-9_-], not {group!r}"
            )
        topic_list: list[object] = [topics] if isinstance(topics, str) else list(topics)
        if not topic_list or not all(isinstance(t, str) and t for t in topic_list):
            raise InvalidConfigError("topics must be a non-empty list of topic names")
        if start_from not in ("earliest", "latest"):
            raise InvalidConfigError(
                f"start_from must be 'earliest' or 'latest', not {start_from!r}"
            )
        if auto_commit_interval_ms < 0 or rebalance_interval_ms < 0:
            raise InvalidConfigError("intervals must not be negative")
        mid = member_id or f"{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex[:8]}"
        if not re.match(r"^[A-Za-z0-9@._-]{1,200}$", mid):
            raise InvalidConfigError(f"member_id {mid!r} must be 1 to 200 of [A-Za-z0-9@._-]")
        self._root = os.path.abspath(os.fspath(path))
        self._store = MessageStore(self._root, read_only=True, **config)
        self.group = group
        self.topics: tuple[str, ...] = tuple(dict.fromkeys(str(t) for t in topic_list))
        self._auto_commit = auto_commit
        self._commit_interval = auto_commit_interval_ms / 1000.0
        self._start_from = start_from
        self._tags = tags
        self._rebalance_interval = rebalance_interval_ms / 1000.0
        self._offsets = _OffsetFile(self._root)
        self._members = _Membership(self._root, group, mid)
        self._assigned: list[QueueKey] = []
        self._positions: dict[QueueKey, int] = {}
        self._committed: dict[QueueKey, int] = {}
        self._next = 0
        self._last_commit = time.monotonic()
        self._last_probe = 0.0
        self._closed = False
        self.rebalances = 0
        try:
            os.makedirs(os.path.join(self._root, CONSUMERS_DIR), exist_ok=True)
            self._members.join()
            self._rebalance()
        except BaseException:
            self._members.leave()
            self._store.close()
            raise

    # -- properties ----------------------------------------------------------------------------

    @property
    def member_id(self) -> str:
        """This member's id in the group."""
        return self._members.member_id

    @property
    def store(self) -> MessageStore:
        """The read-only store handle the consumer reads through."""
        return self._store

    def assignment(self) -> list[QueueKey]:
        """The ``(topic, queue_id)`` pairs this member consumes now, sorted.

        Example::

            consumer.assignment()  # [('orders', 0), ('orders', 1)]
        """
        return list(self._assigned)

    def position(self, topic: str, queue_id: int) -> int:
        """The next offset this member reads from an assigned queue."""
        return self._positions[(topic, queue_id)]

    def committed(self, topic: str, queue_id: int) -> int:
        """The group's committed offset of a queue in ``config/consumerOffset.json`` (-1: none).

        Example::

            consumer.committed("orders", 0)
        """
        return self._offsets.read().get(f"{topic}@{self.group}", {}).get(queue_id, -1)

    # -- group -----------------------------------------------------------------------------

    def _queues_of(self, topic: str) -> list[QueueKey]:
        qids = set(range(_queues.topic_queue_nums(self._root, topic)))
        qids.update(q for t, q, _min, _max in self._store.consume_queues() if t == topic)
        return [(topic, q) for q in sorted(qids)]

    def _start_offset(self, key: QueueKey, table: Mapping[str, Mapping[int, int]]) -> int:
        topic, qid = key
        off = table.get(f"{topic}@{self.group}", {}).get(qid, -1)
        lo = self._store.min_offset_in_queue(topic, qid)
        if off >= 0:
            return max(off, lo)
        if self._start_from == "latest":
            return self._store.max_offset_in_queue(topic, qid)
        return lo

    def _rebalance(self) -> None:
        members = self._members.members()
        self._last_probe = time.monotonic()
        assigned: list[QueueKey] = []
        for topic in self.topics:
            assigned.extend(allocate_averagely(self._queues_of(topic), members, self.member_id))
        assigned.sort()
        if assigned == self._assigned:
            return
        lost = [k for k in self._assigned if k not in assigned]
        if lost and self._auto_commit:
            self._commit_keys(lost)
        table = self._offsets.read()
        positions = {}
        for key in assigned:
            if key in self._positions:
                positions[key] = self._positions[key]
            else:
                positions[key] = self._start_offset(key, table)
                self._committed[key] = table.get(f"{key[0]}@{self.group}", {}).get(key[1], -1)
        self._assigned = assigned
        self._positions = positions
        self._committed = {k: v for k, v in self._committed.items() if k in positions}
        self._next = 0
        self.rebalances += 1

    def _maybe_rebalance(self) -> None:
        due = time.monotonic() - self._last_probe >= self._rebalance_interval
        if due or self._members.changed():
            self._rebalance()

    # -- commits ---------------------------------------------------------------------------

    def _commit_keys(self, keys: Iterable[QueueKey]) -> None:
        todo = {
            k: self._positions[k]
            for k in keys
            if k in self._positions and self._positions[k] != self._committed.get(k)
        }
        if todo:
            self._offsets.update(self.group, todo)
            self._committed.update(todo)

    def commit(
        self,
        message: _native.Message | None = None,
        *,
        offsets: Mapping[QueueKey, int] | None = None,
    ) -> None:
        """Commits offsets to ``config/consumerOffset.json``: with no argument, the position of
        every assigned queue (everything returned so far); ``message``: its queue up to and
        including it; ``offsets``: ``{(topic, queue_id): next_offset}``.

        Example::

            for msg in consumer.poll_batch(100):
                handle(msg)
                consumer.commit(msg)
        """
        self._check_open()
        if message is not None:
            key = (message.topic, message.queue_id)
            todo = {key: message.queue_offset + 1}
        elif offsets is not None:
            todo = {(str(t), int(q)): int(o) for (t, q), o in offsets.items()}
            if any(o < 0 for o in todo.values()):
                raise InvalidConfigError("offsets must not be negative")
        else:
            self._commit_keys(self._assigned)
            self._last_commit = time.monotonic()
            return
        self._offsets.update(self.group, todo)
        self._committed.update(todo)

    def _auto(self) -> None:
        if self._auto_commit and time.monotonic() - self._last_commit >= self._commit_interval:
            self._commit_keys(self._assigned)
            self._last_commit = time.monotonic()

    # -- seeking ---------------------------------------------------------------------------

    def seek(self, topic: str, queue_id: int, offset: int) -> None:
        """Reads an assigned queue from ``offset`` next (committed on the next commit).

        Example::

            consumer.seek("orders", 0, 0)  # replay queue 0
        """
        self._check_open()
        key = (topic, queue_id)
        if key not in self._positions:
            raise InvalidConfigError(f"queue {key} is not assigned to this consumer")
        if offset < 0:
            raise InvalidConfigError("offset must not be negative")
        self._positions[key] = offset

    def seek_to_time(self, timestamp_ms: int, topic: str | None = None) -> None:
        """Every assigned queue (of ``topic``, or all) reads next from its first message stored
        at or after ``timestamp_ms`` (epoch milliseconds).

        Example::

            consumer.seek_to_time(int(time.time() * 1000) - 3_600_000)  # the last hour
        """
        self._check_open()
        for t, q in self._assigned:
            if topic is None or t == topic:
                self._positions[(t, q)] = self._store.get_offset_in_queue_by_time(
                    t, q, timestamp_ms
                )

    def seek_to_beginning(self) -> None:
        """Every assigned queue reads next from its first stored message."""
        self._check_open()
        for t, q in self._assigned:
            self._positions[(t, q)] = self._store.min_offset_in_queue(t, q)

    def seek_to_end(self) -> None:
        """Every assigned queue reads next from its end (only new messages)."""
        self._check_open()
        for t, q in self._assigned:
            self._positions[(t, q)] = self._store.max_offset_in_queue(t, q)

    # -- polling ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the consumer is closed")

    def _fetch(self, max_messages: int) -> list[_native.Message]:
        out: list[_native.Message] = []
        n = len(self._assigned)
        for i in range(n):
            if len(out) >= max_messages:
                break
            key = self._assigned[(self._next + i) % n]
            topic, qid = key
            pos = self._positions[key]
            r = self._store.get_message(topic, qid, pos, max_messages - len(out), tags=self._tags)
            status = r.status
            if status is GetMessageStatus.FOUND:
                out.extend(r.messages)
                self._positions[key] = r.next_begin_offset
            elif status in (
                GetMessageStatus.NO_MATCHED_MESSAGE,
                GetMessageStatus.OFFSET_FOUND_NULL,
                GetMessageStatus.OFFSET_TOO_SMALL,
                GetMessageStatus.MESSAGE_WAS_REMOVING,
                GetMessageStatus.OFFSET_OVERFLOW_BADLY,
            ):
                # Filtered out, or gone (deleted by the store's cleanup): move on.
                self._positions[key] = r.next_begin_offset
        self._next = (self._next + 1) % max(n, 1)
        return out

    def _wait(
        self, fetch: Callable[[], _T], empty: Callable[[_T], bool], timeout: float | None
    ) -> _T:
        self._check_open()
        self._auto()
        self._maybe_rebalance()
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        while True:
            seq = self._store.progress_seq()
            got = fetch()
            if not empty(got):
                return got
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return got
            step = (
                self._rebalance_interval
                if deadline is None
                else min(deadline - now, self._rebalance_interval)
            )
            self._store.wait_progress(seq, timeout_ms=max(int(step * 1000), 1))
            self._maybe_rebalance()

    def poll_batch(
        self, max_messages: int = 500, timeout: float | None = 1.0
    ) -> list[_native.Message]:
        """Up to ``max_messages`` messages from the assigned queues (taken in turn), waiting up
        to ``timeout`` seconds (``None``: until one arrives) for the first; ``[]`` on timeout.

        Example::

            for msg in consumer.poll_batch(max_messages=100, timeout=0.5):
                print(msg.topic, msg.queue_id, msg.queue_offset, msg.body)
        """
        if max_messages < 1:
            raise InvalidConfigError("max_messages must be at least 1")
        return self._wait(lambda: self._fetch(max_messages), lambda m: not m, timeout)

    def poll(self, timeout: float | None = 1.0) -> _native.Message | None:
        """One message, waiting up to ``timeout`` seconds (``None``: until one arrives);
        ``None`` on timeout.

        Example::

            msg = consumer.poll(timeout=5.0)
            if msg is not None:
                print(msg.body)
        """
        got = self.poll_batch(1, timeout)
        return got[0] if got else None

    def poll_arrow(
        self,
        max_messages: int = 65536,
        timeout: float | None = 1.0,
        *,
        max_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        columns: Sequence[str] | None = None,
    ) -> pa.RecordBatch:
        """Up to ``max_messages`` messages from the assigned queues as one
        ``pyarrow.RecordBatch`` (the columns of :meth:`MessageStore.get_message_arrow`,
        ``topic``, ``queue_id`` and ``queue_offset`` among them), waiting up to ``timeout``
        seconds for the first; an empty batch on timeout.

        Example::

            batch = consumer.poll_arrow(10_000, timeout=1.0)
            print(batch.num_rows, batch.column("body"))
        """
        import pyarrow as pa

        if max_messages < 1:
            raise InvalidConfigError("max_messages must be at least 1")

        def fetch() -> pa.RecordBatch:
            parts: list[pa.RecordBatch] = []
            total = 0
            n = len(self._assigned)
            for i in range(n):
                if total >= max_messages:
                    break
                key = self._assigned[(self._next + i) % n]
                pos = self._positions[key]
                if pos >= self._store.max_offset_in_queue(*key):
                    continue
                lo = self._store.min_offset_in_queue(*key)
                pos = max(pos, lo)
                batch, nxt = self._store.get_message_arrow(
                    key[0],
                    key[1],
                    pos,
                    max_messages - total,
                    tags=self._tags,
                    max_bytes=max_bytes,
                    columns=columns,
                )
                self._positions[key] = max(nxt, pos)
                if batch.num_rows:
                    parts.append(batch)
                    total += batch.num_rows
            self._next = (self._next + 1) % max(n, 1)
            if not parts:
                schema = _projected_schema(_columns(columns))
                return pa.RecordBatch.from_pylist([], schema=schema)
            if len(parts) == 1:
                return parts[0]
            return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]

        return self._wait(fetch, lambda b: b.num_rows == 0, timeout)

    def __iter__(self) -> Iterator[_native.Message]:
        """Messages as they come, forever (until :meth:`close` or an exception)."""
        while not self._closed:
            yield from self.poll_batch(500, timeout=None)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Commits (with ``auto_commit``), leaves the group (the other members take its queues
        over at their next poll) and closes the store. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._auto_commit:
                self._commit_keys(self._assigned)
        finally:
            self._members.leave()
            self._store.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._assigned)} queues"
        return f"<rocketstore.Consumer group={self.group!r} member={self.member_id!r} {state}>"
