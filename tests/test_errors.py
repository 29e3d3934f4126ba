"""Every input rule raises its typed exception and leaves the store readable and unchanged.

Rules: reliability.md §4.3 (topics, queue ids, bodies, properties, reserved names, keys) and
the binding's own type rules (TypeError for wrong types and None, never PanicException).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, cast

import pytest

import rocketstore
from rocketstore import MessageStore
from rocketstore.exceptions import (
    InvalidConfigError,
    InvalidMessageError,
    MessageStoreError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    StoreIOError,
    StoreReadOnlyError,
)

Digest = Callable[[Path], dict[str, Any]]

#: Small consume queue and index files: the defaults (6 MB per queue, a 420 MB index file)
#: make every store in a test slow to create and to checksum.
SIDE_FILES: dict[str, Any] = {
    "mapped_file_size_consume_queue": 20 * 1024,
    "max_hash_slot_num": 1024,
    "max_index_num": 4096,
}

CONFIG: dict[str, Any] = {
    **SIDE_FILES,
    "mapped_file_size_commit_log": 64 * 1024,
    "max_message_size": 1024,
    "max_queue_nums_per_topic": 8,
}


#: Rewritten by a background service on a timer (timestamps), whatever the API calls do.
PERIODIC_FILES = {"checkpoint"}


def stable_digest(tree_digest: Digest, root: Path) -> dict[str, Any]:
    """The tree digest (less periodically rewritten files) once background dispatch settled."""

    def digest() -> dict[str, Any]:
        return {k: v for k, v in tree_digest(root).items() if k not in PERIODIC_FILES}

    before = digest()
    for _ in range(50):
        time.sleep(0.02)
        after = digest()
        if after == before:
            return after
        before = after
    return before


def wait_dispatched(store: MessageStore, timeout_s: float = 30.0) -> None:
    """Blocks until the dispatch service has built CQ and index for every stored record."""
    deadline = time.monotonic() + timeout_s
    while store.stats()["dispatch_behind_bytes"] > 0:
        assert time.monotonic() < deadline, "dispatch did not catch up"
        time.sleep(0.005)


@pytest.fixture
def store(store_dir: Path) -> Iterator[MessageStore]:
    with MessageStore(store_dir, **CONFIG) as s:
        s.put_batch(
            [{"topic": "Base", "body": f"m{i}".encode(), "queue_id": i % 4} for i in range(20)]
        )
        s.flush()
        wait_dispatched(s)
        yield s


def assert_unchanged(
    store: MessageStore,
    store_dir: Path,
    tree_digest: Digest,
    call: Callable[[], object],
    exc: type[BaseException] | tuple[type[BaseException], ...],
) -> BaseException:
    """Runs ``call``, expects ``exc``, and checks that nothing changed on disk or in the store."""
    before = stable_digest(tree_digest, store_dir)
    max_offset = store.max_commitlog_offset()
    queues = store.queue_offsets()
    count = sum(1 for _ in store.scan())
    with pytest.raises(exc) as info:
        call()
    assert isinstance(info.value, Exception), "must be catchable with `except Exception`"
    assert stable_digest(tree_digest, store_dir) == before
    assert store.max_commitlog_offset() == max_offset
    assert store.queue_offsets() == queues
    assert sum(1 for _ in store.scan(verify_crc=True)) == count
    return info.value


# --------------------------------------------------------------------------------------
# Value rules -> InvalidMessageError family (ValueError subclasses)
# --------------------------------------------------------------------------------------

BAD_TOPICS = [
    pytest.param("", id="empty"),
    pytest.param("t" * 256, id="256-chars"),
    pytest.param("a b", id="space"),
    pytest.param("a/b", id="slash"),
    pytest.param("a\\b", id="backslash"),
    pytest.param("a.b", id="dot-inside"),
    pytest.param(".", id="dot"),
    pytest.param("..", id="dotdot"),
    pytest.param("../x", id="parent-escape"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("tópico", id="non-ascii"),
    pytest.param("\u0422opic", id="cyrillic-confusable"),
    pytest.param("a\udc80", id="lone-surrogate"),
]


@pytest.mark.parametrize("topic", BAD_TOPICS)
def test_bad_topic(store: MessageStore, store_dir: Path, tree_digest: Digest, topic: str) -> None:
    e = assert_unchanged(
        store, store_dir, tree_digest, lambda: store.put(topic, b"x"), InvalidMessageError
    )
    assert isinstance(e, ValueError)
    assert isinstance(e, MessageStoreError)
    assert cast(InvalidMessageError, e).field == "topic"
    assert not (store_dir.parent / "x").exists()


def test_long_topics_up_to_255_are_accepted(store: MessageStore) -> None:
    for n in (127, 128, 200, 255):
        r = store.put("T" * n, b"x")
        assert store.look_message_by_offset(r.commitlog_offset).topic == "T" * n


@pytest.mark.parametrize("queue_id", [-1, 8, 1000, 2**31 - 1, -(2**31), 2**40, -(2**40)])
def test_bad_queue_id(
    store: MessageStore, store_dir: Path, tree_digest: Digest, queue_id: int
) -> None:
    e = assert_unchanged(
        store,
        store_dir,
        tree_digest,
        lambda: store.put("T", b"x", queue_id=queue_id),
        InvalidMessageError,
    )
    assert cast(InvalidMessageError, e).field == "queue_id"


def test_queue_id_boundaries(store: MessageStore) -> None:
    assert store.put("T", b"x", queue_id=0).ok
    assert store.put("T", b"x", queue_id=7).ok


def test_body_too_large(store: MessageStore, store_dir: Path, tree_digest: Digest) -> None:
    assert store.put("T", b"x" * 1024).ok  # exactly max_message_size
    e = assert_unchanged(
        store, store_dir, tree_digest, lambda: store.put("T", b"x" * 1025), MessageTooLargeError
    )
    assert isinstance(e, MessageTooLargeError)
    assert isinstance(e, InvalidMessageError)
    assert (e.field, e.size, e.max) == ("body", 1025, 1024)


def test_properties_too_large(store_dir: Path, tree_digest: Digest) -> None:
    with MessageStore(store_dir, **SIDE_FILES, mapped_file_size_commit_log=1 << 20) as store:
        store.put_batch([{"topic": "Base", "body": f"m{i}".encode()} for i in range(20)])
        assert store.put("T", b"x", properties={"k": "v" * 30_000}).ok
        store.flush()
        e = assert_unchanged(
            store,
            store_dir,
            tree_digest,
            lambda: store.put("T", b"x", properties={"k": "v" * 32_800}),
            MessageTooLargeError,
        )
        assert isinstance(e, MessageTooLargeError)
        assert e.field == "properties"
        assert e.max == 32767
        assert e.size is not None
        assert e.size > 32767


SEPARATORS = ["\x01", "\x02", "\x00"]


@pytest.mark.parametrize("sep", SEPARATORS, ids=["x01", "x02", "nul"])
@pytest.mark.parametrize(
    ("where", "field"),
    [
        ("name", "properties"),
        ("value", "properties"),
        ("tags", "tags"),
        ("keys", "keys"),
    ],
)
def test_separators_are_refused(  # noqa: PLR0917 (fixtures and parameters)
    store: MessageStore, store_dir: Path, tree_digest: Digest, sep: str, where: str, field: str
) -> None:
    cases: dict[str, dict[str, Any]] = {
        "name": {"properties": {f"a{sep}b": "v"}},
        "value": {"properties": {"name": f"a{sep}b"}},
        "tags": {"tags": f"a{sep}b"},
        "keys": {"keys": [f"a{sep}b"]},
    }
    kwargs = cases[where]
    e = assert_unchanged(
        store, store_dir, tree_digest, lambda: store.put("T", b"x", **kwargs), InvalidMessageError
    )
    assert cast(InvalidMessageError, e).field == field


@pytest.mark.parametrize(
    "name", ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "REAL_TOPIC", "REAL_QID", "WAIT", "TRAN_MSG"]
)
def test_reserved_property_names(
    store: MessageStore, store_dir: Path, tree_digest: Digest, name: str
) -> None:
    e = assert_unchanged(
        store,
        store_dir,
        tree_digest,
        lambda: store.put("T", b"x", properties={name: "v"}),
        InvalidMessageError,
    )
    assert cast(InvalidMessageError, e).field == "properties"
    assert name in str(e)


@pytest.mark.parametrize("properties", [{"": "v"}, {"k": ""}], ids=["blank-name", "blank-value"])
def test_blank_property_names_or_values(
    store: MessageStore, store_dir: Path, tree_digest: Digest, properties: dict[str, str]
) -> None:
    e = assert_unchanged(
        store,
        store_dir,
        tree_digest,
        lambda: store.put("T", b"x", properties=properties),
        InvalidMessageError,
    )
    assert cast(InvalidMessageError, e).field == "properties"


# One rule (rocketstore_format::keys): a str is stored as is ("a b" is fine), a list is joined
# with one space and an element holding a space (or a separator character) is refused.
@pytest.mark.parametrize("keys", [["a b"], ["ok", " lead"], ["x\x01"], "a\x02b"])
def test_bad_keys(store: MessageStore, store_dir: Path, tree_digest: Digest, keys: Any) -> None:
    e = assert_unchanged(
        store, store_dir, tree_digest, lambda: store.put("T", b"x", keys=keys), InvalidMessageError
    )
    assert cast(InvalidMessageError, e).field == "keys"


@pytest.mark.parametrize("host", ["nohost", "1.2.3.4", "1.2.3.4:70000", "[::1]", "x:1", ""])
def test_bad_hosts(store: MessageStore, store_dir: Path, tree_digest: Digest, host: str) -> None:
    for field in ("born_host", "store_host"):
        e = assert_unchanged(
            store,
            store_dir,
            tree_digest,
            partial(cast(Any, store).put, "T", b"x", **{field: host}),
            InvalidMessageError,
        )
        assert cast(InvalidMessageError, e).field == field


def test_batch_is_refused_whole(store: MessageStore, store_dir: Path, tree_digest: Digest) -> None:
    batch: list[dict[str, Any]] = [{"topic": "Ok", "body": b"x"} for _ in range(5)]
    batch.insert(3, {"topic": "bad topic", "body": b"x"})
    e = assert_unchanged(
        store, store_dir, tree_digest, lambda: store.put_batch(batch), InvalidMessageError
    )
    assert "message 3" in str(e)
    assert cast(InvalidMessageError, e).field == "topic"

    unknown: list[dict[str, Any]] = [
        {"topic": "Ok", "body": b"x"},
        {"topic": "Ok", "body": b"x", "tag": "t"},
    ]
    e = assert_unchanged(
        store, store_dir, tree_digest, lambda: store.put_batch(unknown), InvalidMessageError
    )
    assert "message 1" in str(e)
    assert "'tag'" in str(e).replace('"', "'")
    assert cast(InvalidMessageError, e).field == "tag"

    missing: list[dict[str, Any]] = [{"topic": "Ok", "body": b"x"}, {"topic": "Ok"}]
    e = assert_unchanged(
        store, store_dir, tree_digest, lambda: store.put_batch(missing), InvalidMessageError
    )
    assert "message 1" in str(e)
    assert cast(InvalidMessageError, e).field == "body"

    huge: list[dict[str, Any]] = [
        {"topic": "Ok", "body": b"x"},
        {"topic": "Ok", "body": b"x" * 2000},
    ]
    assert_unchanged(
        store, store_dir, tree_digest, lambda: store.put_batch(huge), MessageTooLargeError
    )


# --------------------------------------------------------------------------------------
# Type rules -> TypeError; huge ints -> OverflowError or InvalidMessageError
# --------------------------------------------------------------------------------------

BAD_TYPES: list[Any] = [
    pytest.param({"topic": None}, id="topic-None"),
    pytest.param({"topic": 5}, id="topic-int"),
    pytest.param({"topic": b"T"}, id="topic-bytes"),
    pytest.param({"body": None}, id="body-None"),
    pytest.param({"body": "text"}, id="body-str"),
    pytest.param({"body": 5}, id="body-int"),
    pytest.param({"body": [1, 2]}, id="body-list"),
    pytest.param({"body": memoryview(b"abcd").cast("I")}, id="body-memoryview-int"),
    pytest.param({"queue_id": "1"}, id="queue_id-str"),
    pytest.param({"queue_id": 1.0}, id="queue_id-float"),
    pytest.param({"flag": None}, id="flag-None"),
    pytest.param({"flag": "0"}, id="flag-str"),
    pytest.param({"tags": 5}, id="tags-int"),
    pytest.param({"tags": b"t"}, id="tags-bytes"),
    pytest.param({"keys": 5}, id="keys-int"),
    pytest.param({"keys": [1]}, id="keys-list-of-int"),
    pytest.param({"keys": {"a"}}, id="keys-set"),
    pytest.param({"keys": [None]}, id="keys-None-item"),
    pytest.param({"properties": [("a", "b")]}, id="properties-list"),
    pytest.param({"properties": {"a": 1}}, id="properties-int-value"),
    pytest.param({"properties": {1: "a"}}, id="properties-int-key"),
    pytest.param({"properties": "a=b"}, id="properties-str"),
    pytest.param({"born_timestamp": "now"}, id="born_timestamp-str"),
    pytest.param({"born_timestamp": 1.5}, id="born_timestamp-float"),
    pytest.param({"born_host": 5}, id="born_host-int"),
    pytest.param({"store_host": ("1.2.3.4", 5)}, id="store_host-tuple"),
]


@pytest.mark.parametrize("override", BAD_TYPES)
def test_wrong_types_raise_type_error(
    store: MessageStore, store_dir: Path, tree_digest: Digest, override: dict[str, Any]
) -> None:
    args: dict[str, Any] = {"topic": "T", "body": b"x", **override}
    untyped = cast(Any, store)
    e = assert_unchanged(
        store,
        store_dir,
        tree_digest,
        lambda: untyped.put(args.pop("topic"), args.pop("body"), **args),
        TypeError,
    )
    if "body" in override and isinstance(override["body"], str):
        assert ".encode()" in str(e)
    # The same values in a put_batch dict give the same exception type, naming the index.
    item = {"topic": "T", "body": b"x", **override}
    e = assert_unchanged(
        store,
        store_dir,
        tree_digest,
        lambda: untyped.put_batch([{"topic": "T", "body": b"y"}, item]),
        TypeError,
    )
    assert "message 1" in str(e)


def test_wrong_container_types(store: MessageStore) -> None:
    untyped = cast(Any, store)
    with pytest.raises(TypeError):
        untyped.put_batch(None)
    with pytest.raises(TypeError):
        untyped.put_batch({"topic": "T", "body": b"x"})
    with pytest.raises(TypeError):
        untyped.put_batch(["not a dict"])
    with pytest.raises(TypeError):
        untyped.put_batch([{1: "T"}])
    with pytest.raises(TypeError):
        untyped.put("T")
    with pytest.raises(TypeError):
        untyped.put("T", b"x", unknown=1)
    with pytest.raises(TypeError):
        untyped.look_message_by_offset("0")
    with pytest.raises(TypeError):
        untyped.look_message_by_offset(None)
    with pytest.raises(TypeError):
        untyped.scan("0")
    with pytest.raises(TypeError):
        MessageStore(cast(Any, None))


@pytest.mark.parametrize("value", [2**63, 2**64, 2**100, -(2**63) - 1])
def test_huge_ints(store: MessageStore, value: int) -> None:
    for kwargs in ({"queue_id": value}, {"flag": value}, {"born_timestamp": value}):
        with pytest.raises((OverflowError, InvalidMessageError)):
            cast(Any, store).put("T", b"x", **kwargs)
    with pytest.raises((OverflowError, OffsetOutOfRangeError)):
        store.look_message_by_offset(value)
    with pytest.raises((OverflowError, InvalidMessageError)):
        store.put_batch([{"topic": "T", "body": b"x", "queue_id": value}])


def test_ints_convert_like_put(store: MessageStore) -> None:
    # put_batch dicts convert ints exactly like put's keywords (bool is an int in Python).
    a = store.put("T", b"x", queue_id=True)
    (b,) = store.put_batch([{"topic": "T", "body": b"x", "queue_id": True}])
    assert store.look_message_by_offset(a.commitlog_offset).queue_id == 1
    assert store.look_message_by_offset(b.commitlog_offset).queue_id == 1


# --------------------------------------------------------------------------------------
# Reads
# --------------------------------------------------------------------------------------


def test_offsets_out_of_range(store: MessageStore) -> None:
    end = store.max_commitlog_offset()
    for offset in (-1, -(2**40), end, end + 1, 2**62):
        with pytest.raises(OffsetOutOfRangeError) as info:
            store.look_message_by_offset(offset)
        e = info.value
        assert isinstance(e, IndexError)
        assert (e.requested, e.min, e.max) == (offset, 0, end)
    with pytest.raises(OffsetOutOfRangeError):
        store.scan(-5)


def test_offset_inside_a_record(store: MessageStore) -> None:
    with pytest.raises(InvalidMessageError) as info:
        store.look_message_by_offset(3)
    assert info.value.field == "commitlog_offset"
    with pytest.raises(InvalidMessageError):
        list(store.scan(3))


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------


def test_config_errors(store_dir: Path) -> None:
    with pytest.raises(InvalidConfigError) as info:
        MessageStore(store_dir, mapped_file_size_comit_log=65536)
    e = info.value
    assert isinstance(e, ValueError)
    assert e.key == "mapped_file_size_comit_log"
    assert e.suggestions[0] == "mapped_file_size_commit_log"
    assert "did you mean" in str(e)
    with pytest.raises(InvalidConfigError) as info:
        MessageStore(store_dir, completely_unknown=1)
    assert info.value.suggestions == ()
    with pytest.raises(InvalidConfigError) as info:
        MessageStore(store_dir, **SIDE_FILES, mapped_file_size_commit_log=10)
    assert info.value.key == "mapped_file_size_commit_log"
    with pytest.raises(InvalidConfigError):
        MessageStore(store_dir, **SIDE_FILES, mapped_file_size_commit_log=True)
    with pytest.raises(InvalidConfigError):
        MessageStore(store_dir, flush_disk_type="SOMETIMES")
    with pytest.raises(InvalidConfigError):
        MessageStore(store_dir, fsync_directory=1)
    with pytest.raises(InvalidConfigError):
        MessageStore(store_dir, max_message_size=2**70)
    with pytest.raises(TypeError):
        cast(Any, MessageStore)(store_dir, max_message_size=1.5)
    with pytest.raises(TypeError):
        cast(Any, MessageStore)(store_dir, max_message_size=None)
    assert not store_dir.exists(), "a refused configuration must not create the store"


# --------------------------------------------------------------------------------------
# Opening: locks, read-only, I/O errors
# --------------------------------------------------------------------------------------

SECOND_OPENER = textwrap.dedent(
    """
    import json
    import sys
    import rocketstore
    config = json.loads(sys.argv[2])
    try:
        rocketstore.MessageStore(sys.argv[1], **config)
    except rocketstore.StoreLockedError as e:
        assert e.path is not None and e.path.endswith("lock"), e.path
        print("locked")
    else:
        print("opened")
    with rocketstore.MessageStore(sys.argv[1], read_only=True, **config) as ro:
        print(sum(1 for _ in ro.scan()))
    """
)


def test_second_writer_in_another_process_is_locked_out(
    store: MessageStore, store_dir: Path
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SECOND_OPENER, str(store_dir), json.dumps(CONFIG)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["locked", "20"]
    assert store.put("T", b"still writable").ok


def test_read_only_changes_nothing_and_refuses_writes(store_dir: Path, tree_digest: Digest) -> None:
    with MessageStore(store_dir, **CONFIG) as s:
        s.put_batch([{"topic": "Base", "body": f"m{i}".encode()} for i in range(20)])
    (store_dir / "lock").unlink()  # read-only must not create it
    before = tree_digest(store_dir)
    with MessageStore(store_dir, read_only=True, **SIDE_FILES) as ro:
        assert ro.read_only
        assert sum(1 for _ in ro.scan(verify_crc=True)) == 20
        assert ro.look_message_by_offset(0).body == b"m0"
        for call in (
            lambda: ro.put("T", b"x"),
            lambda: ro.put_batch([{"topic": "T", "body": b"x"}]),
            lambda: ro.put_batch([]),
        ):
            with pytest.raises(StoreReadOnlyError) as info:
                call()
            assert info.value.path == str(store_dir)
        assert ro.flush() == ro.max_commitlog_offset()
        # A writer may open the directory while a reader has it open.
        with MessageStore(store_dir, **CONFIG) as writer:
            assert writer.max_commitlog_offset() == ro.max_commitlog_offset()
        (store_dir / "lock").unlink()
        before = tree_digest(store_dir)
    assert tree_digest(store_dir) == before
    assert not (store_dir / "lock").exists()
    assert not (store_dir / "abort").exists()


def test_read_only_on_a_missing_directory(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(StoreIOError) as info:
        MessageStore(missing, read_only=True)
    e = info.value
    assert isinstance(e, OSError)
    assert e.errno == 2
    assert e.strerror == os.strerror(2)
    assert e.filename == str(missing)
    assert e.op
    assert str(e).startswith(f"{e.op} failed on {missing}"), str(e)
    assert not missing.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_unwritable_directory(tmp_path: Path) -> None:  # pragma: no cover - CI runs as non-root
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(StoreIOError) as info:
            MessageStore(tmp_path / "store")
        assert info.value.errno == 13
    finally:
        tmp_path.chmod(0o700)


def test_exception_tree() -> None:
    ex = rocketstore.exceptions
    for name in ex.__all__:
        cls = getattr(ex, name)
        assert issubclass(cls, MessageStoreError)
        assert getattr(rocketstore, name) is cls
        if name not in ex.PYTHON_ONLY:
            assert getattr(rocketstore._native, name) is cls
        assert cls.__doc__
    assert issubclass(ex.StoreIOError, OSError)
    assert issubclass(ex.DiskFullError, ex.StoreIOError)
    assert issubclass(ex.OffsetOutOfRangeError, IndexError)
    assert issubclass(ex.InvalidConfigError, ValueError)
    assert issubclass(ex.InvalidMessageError, ValueError)
    assert issubclass(ex.MessageTooLargeError, ex.InvalidMessageError)
    e = ex.InvalidMessageError("by hand")
    assert e.field is None


def test_store_path_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "a-file"
    path.write_bytes(b"not a directory")
    with pytest.raises(StoreIOError) as info:
        MessageStore(path)
    assert info.value.errno == 20  # ENOTDIR
    assert info.value.filename is not None
    # Said as what it is, before any mkdir is tried ("mkdir failed ... File exists" was).
    assert "it is a file, not a directory" in str(info.value)
    assert "mkdir" not in str(info.value)
    with pytest.raises(StoreIOError, match="it is a file, not a directory"):
        MessageStore(path, read_only=True)
    assert path.read_bytes() == b"not a directory"
