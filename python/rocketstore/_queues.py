"""Producer-side queue choice: the queue of a message put without a ``queue_id``.

The rule is the Spark writer's (``queueSelector``): ``"hash"`` (the default) sends a message
with keys to queue ``crc32(utf8(keys joined by " ")) % queue_nums`` (the same keys always land
on the same queue, so their order is kept) and a message without keys round robin;
``"round_robin"`` sends every message round robin. ``queue_nums`` is the topic's
``writeQueueNums`` in the store's ``config/topics.json`` (RocketMQ's topic config, which
:func:`set_topic_queue_nums` writes and the store extends on close to every queue it wrote),
and :data:`DEFAULT_QUEUE_NUMS` (1: queue 0, as before topics had a queue count) for a topic the
file does not list. An explicit ``queue_id`` always wins.
"""

from __future__ import annotations

import json
import os
import threading
import time
import zlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from rocketstore.exceptions import InvalidConfigError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DEFAULT_QUEUE_NUMS", "QueueSelector", "set_topic_queue_nums", "topic_queue_nums"]

#: Queues of a topic that ``config/topics.json`` does not list: one (queue 0), so a store whose
#: topics are not configured keeps every message of a topic in one queue, in put order.
#: :func:`set_topic_queue_nums` gives a topic more (RocketMQ's ``defaultTopicQueueNums`` is 4).
DEFAULT_QUEUE_NUMS = 1

QueueSelector = Literal["hash", "round_robin"]
_SELECTORS = ("hash", "round_robin")

_lock = threading.Lock()
# store root -> (topics.json mtime_ns, when it was looked at, {topic: writeQueueNums})
_topics: dict[str, tuple[int, float, dict[str, int]]] = {}
_RECHECK_S = 0.1
# (store root, topic) -> next round robin counter
_counters: dict[tuple[str, bytes], int] = {}


def _check_selector(selector: str) -> None:
    if selector not in _SELECTORS:
        err = InvalidConfigError(
            f"queue_selector must be 'hash' (of the keys) or 'round_robin', not {selector!r}"
        )
        raise err


def _load_topics(root: str) -> dict[str, int]:
    # The file's mtime is looked at most every _RECHECK_S per store: a put costs no stat.
    now = time.monotonic()
    with _lock:
        cached = _topics.get(root)
        if cached is not None and now - cached[1] < _RECHECK_S:
            return cached[2]
    path = os.path.join(root, "config", "topics.json")
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        mtime = -1
    if cached is not None and cached[0] == mtime:
        with _lock:
            _topics[root] = (mtime, now, cached[2])
        return cached[2]
    table: dict[str, int] = {}
    try:
        with open(path, "rb") as f:
            doc = json.load(f)
        for name, cfg in (doc.get("topicConfigTable") or {}).items():
            n = cfg.get("writeQueueNums") if isinstance(cfg, dict) else None
            if isinstance(n, int) and n > 0:
                table[str(name)] = n
    except (OSError, ValueError, AttributeError):
        table = {}
    with _lock:
        _topics[root] = (mtime, now, table)
    return table


def topic_queue_nums(root: str | os.PathLike[str], topic: str) -> int:
    """Queues a put without ``queue_id`` spreads ``topic`` over in the store at ``root``.

    The topic's ``writeQueueNums`` in ``config/topics.json``, else :data:`DEFAULT_QUEUE_NUMS`.

    Example::

        n = rocketstore.topic_queue_nums("/tmp/demo-store", "TopicTest")  # 1 if not configured
    """
    return _load_topics(os.fspath(root)).get(topic, DEFAULT_QUEUE_NUMS)


def _next_robin(root: str, topic: str, n: int) -> int:
    if n <= 1:
        return 0
    key = (root, topic.encode())  # a copy: the caller's str is not kept alive
    with _lock:
        c = _counters.get(key, os.getpid())
        _counters[key] = c + 1
    return c % n


def _keys_text(keys: object) -> str | None:
    if keys is None:
        return None
    if isinstance(keys, str):
        return keys or None
    if isinstance(keys, Iterable):
        text = " ".join(str(k) for k in keys)
        return text or None
    return None


def choose(root: str, topic: str, keys: object, selector: str) -> int:
    """The queue of one message put without ``queue_id``."""
    _check_selector(selector)
    n = topic_queue_nums(root, topic)
    if n <= 1:
        return 0
    if selector == "hash":
        text = _keys_text(keys)
        if text is not None:
            return zlib.crc32(text.encode("utf-8")) % n
    return _next_robin(root, topic, n)


def fill_dicts(root: str, messages: Any, selector: str) -> Any:
    """``messages`` with a ``queue_id`` for each message of a topic with more than one queue
    that has none (a new dict for those). Anything that is not an iterable of dicts is
    returned as it is, for the native ``put_batch`` to refuse."""
    _check_selector(selector)
    if isinstance(messages, (str, bytes, bytearray, Mapping)):
        return messages
    try:
        items = messages if isinstance(messages, (list, tuple)) else list(messages)
    except TypeError:
        return messages
    table = _load_topics(root)
    if not table:
        return items  # no topic configured: one queue each (queue 0, the native default)
    out: list[Any] = []
    for m in items:
        if isinstance(m, Mapping) and m.get("queue_id") is None and isinstance(m.get("topic"), str):
            topic = m["topic"]
            if table.get(topic, DEFAULT_QUEUE_NUMS) > 1:
                d = dict(m)
                d["queue_id"] = choose(root, topic, m.get("keys"), selector)
                out.append(d)
                continue
        out.append(m)
    return out


def fill_arrow(root: str, batch: pa.RecordBatch, selector: str) -> pa.RecordBatch:
    """``batch`` with its missing (or null) ``queue_id`` values chosen: one native call (the
    Spark writer's ``prepare_batch``) per distinct queue count among the batch's topics."""
    import pyarrow as pa
    import pyarrow.compute as pc

    _check_selector(selector)
    names = batch.schema.names
    if "queue_id" in names and batch.column(names.index("queue_id")).null_count == 0:
        return batch
    if batch.num_rows == 0 or "topic" not in names:
        return batch
    topics = batch.column(names.index("topic"))
    counts = {t: topic_queue_nums(root, t) for t in pc.unique(topics).to_pylist() if t is not None}
    nums = sorted(set(counts.values())) or [DEFAULT_QUEUE_NUMS]
    if nums == [1]:
        return batch  # one queue each: queue 0, the native default
    if len(nums) == 1:
        return _choose_arrow(root, batch, selector, nums[0])
    # Topics with different queue counts: one pass per count, rows put back in their order.
    parts = []
    positions = []
    for n in nums:
        mask = pc.is_in(topics, value_set=pa.array([t for t, c in counts.items() if c == n]))
        parts.append(_choose_arrow(root, batch.filter(mask), selector, n))
        positions.append(pc.indices_nonzero(mask))
    order = pc.sort_indices(pa.concat_arrays(positions))
    merged = pa.Table.from_batches(parts).combine_chunks().take(order)
    return merged.combine_chunks().to_batches()[0]


def _choose_arrow(
    root: str, batch: pa.RecordBatch, selector: str, queue_nums: int
) -> pa.RecordBatch:
    from rocketstore._native import prepare_batch

    key = (root, b"")
    with _lock:
        counter = _counters.get(key, os.getpid())
    try:
        queues, _digest, counter = prepare_batch(batch, selector, queue_nums, counter)
    except TypeError:
        return batch  # columns the chooser does not read: the native put reports them
    with _lock:
        _counters[key] = counter
    if queues is None:
        return batch
    names = batch.schema.names
    if "queue_id" in names:
        return batch.set_column(names.index("queue_id"), "queue_id", queues)
    return batch.append_column("queue_id", queues)


def fill_arrow_any(root: str, data: Any, selector: str) -> Any:
    """Arrow input of ``put_batch`` with its queues chosen; returned as it is when every row
    has a ``queue_id`` already."""
    import pyarrow as pa

    _check_selector(selector)
    if not any(n > 1 for n in _load_topics(root).values()):
        return data  # every topic has one queue: queue 0, the native put's default
    if isinstance(data, pa.RecordBatch):
        batch = data
        names = batch.schema.names
        if "queue_id" in names and batch.column(names.index("queue_id")).null_count == 0:
            return batch
    else:
        table = data if isinstance(data, pa.Table) else pa.table(data)
        if "queue_id" in table.schema.names and table.column("queue_id").null_count == 0:
            return table
        if table.num_rows == 0:
            return table
        batch = table.combine_chunks().to_batches()[0]
    try:
        # Malformed buffers (which the native put refuses with a typed error) must not reach
        # pyarrow's compute kernels (or the chooser), which trust them.
        batch.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowException):
        return batch
    return fill_arrow(root, batch, selector)


def set_topic_queue_nums(root: str | os.PathLike[str], topic: str, queue_nums: int) -> None:
    """Sets ``topic``'s queue count (``readQueueNums``/``writeQueueNums``) in the store's
    ``config/topics.json``, in RocketMQ's format (other topics and fields kept; written to a
    temporary file, ``fsync``-ed and renamed). Puts without ``queue_id`` then spread the topic
    over that many queues, and consumer groups split them. Refused
    (:class:`~rocketstore.exceptions.StoreLockedError`) while a writer has the store open (it
    rewrites the file when it closes): configure topics before opening the writer.

    Example::

        rocketstore.set_topic_queue_nums("/data/log", "orders", 8)
        with rocketstore.MessageStore("/data/log") as store:
            store.put("orders", b"...", keys=["order-42"])  # queue crc32(b"order-42") % 8
    """
    import fcntl

    from rocketstore.exceptions import StoreLockedError

    topic_arg: object = topic
    nums: object = queue_nums
    if not isinstance(topic_arg, str) or not topic_arg:
        raise InvalidConfigError("topic must be a non-empty string")
    if not isinstance(nums, int) or isinstance(nums, bool) or not 1 <= nums <= 1024:
        raise InvalidConfigError(f"queue_nums must be an integer in [1, 1024], not {queue_nums!r}")
    root = os.fspath(root)
    lock_path = os.path.join(root, "lock")
    if os.path.exists(lock_path):
        fd = os.open(lock_path, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                raise StoreLockedError(
                    f"{root} is open for writing: set topic queue counts before opening it"
                ) from e
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    config = os.path.join(root, "config")
    os.makedirs(config, exist_ok=True)
    path = os.path.join(config, "topics.json")
    doc: dict[str, Any] = {}
    try:
        with open(path, "rb") as f:
            doc = json.load(f)
    except FileNotFoundError:
        pass
    except ValueError as e:
        raise InvalidConfigError(f"{path} is not JSON: {e}") from e
    table = doc.setdefault("topicConfigTable", {})
    entry = table.setdefault(
        topic,
        {
            "order": False,
            "perm": 6,
            "topicFilterType": "SINGLE_TAG",
            "topicName": topic,
            "topicSysFlag": 0,
        },
    )
    entry["readQueueNums"] = queue_nums
    entry["writeQueueNums"] = queue_nums
    version = doc.setdefault("dataVersion", {"counter": 0, "timestamp": 0})
    version["counter"] = int(version.get("counter", 0)) + 1
    version["timestamp"] = int(time.time() * 1000)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    with _lock:
        _topics.pop(root, None)
