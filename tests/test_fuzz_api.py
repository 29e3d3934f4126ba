"""Property tests: random values and types into the API raise only our exceptions.

Whatever goes in, the only exceptions allowed out are ``TypeError``, ``ValueError``
(including :class:`InvalidMessageError`), ``OverflowError`` and :class:`MessageStoreError`
subclasses, never ``pyo3_runtime.PanicException`` (a ``BaseException``, which
``except Exception`` would not catch). Everything accepted must read back identically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import MessageStore
from rocketstore.exceptions import InvalidMessageError, MessageStoreError

#: Small consume queue and index files: the defaults (6 MB per queue, a 420 MB index file)
#: make every store in a test slow to create and to checksum.
SIDE_FILES: dict[str, Any] = {
    "mapped_file_size_consume_queue": 20 * 1024,
    "max_hash_slot_num": 1024,
    "max_index_num": 4096,
}

ALLOWED = (TypeError, ValueError, OverflowError, MessageStoreError)
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TOPIC_CHARS = "abcXYZ019%|_-"


def as_memoryview(b: bytes) -> memoryview:
    return memoryview(b)


valid_topics = st.text(alphabet=TOPIC_CHARS, min_size=1, max_size=255)
any_text = st.text(max_size=40)
odd_ints = st.one_of(
    st.integers(-5, 20),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, -(2**63)]),
)
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True),
    odd_ints,
    any_text,
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(any_text, st.integers(), max_size=2),
)

topics = st.one_of(valid_topics, any_text, junk)
bodies = st.one_of(
    st.binary(max_size=300),
    st.binary(max_size=300).map(bytearray),
    st.binary(max_size=300).map(as_memoryview),
    junk,
)
queue_ids = st.one_of(st.integers(-2, 10), odd_ints, junk)
tags = st.one_of(st.none(), st.text(alphabet=TOPIC_CHARS, min_size=1, max_size=10), any_text, junk)
keys = st.one_of(
    st.none(),
    any_text,
    st.lists(st.text(alphabet=TOPIC_CHARS, min_size=1, max_size=8), max_size=4),
    st.lists(any_text, max_size=3),
    st.tuples(any_text),
    junk,
)
properties = st.one_of(
    st.none(),
    st.dictionaries(
        st.text(alphabet=TOPIC_CHARS, min_size=1, max_size=8),
        st.text(min_size=1, max_size=20),
        max_size=4,
    ),
    st.dictionaries(any_text, any_text, max_size=3),
    st.dictionaries(
        st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "ok"]), any_text, max_size=2
    ),
    junk,
)
hosts = st.one_of(
    st.none(),
    st.sampled_from(["127.0.0.1:1", "10.0.0.1:10911", "[::1]:80", "1.2.3.4:65536", ":", "a:b"]),
    junk,
)


def check_allowed(e: BaseException) -> None:
    assert type(e).__name__ != "PanicException", f"panic reached Python: {e!r}"
    assert isinstance(e, ALLOWED), f"unexpected {type(e).__name__}: {e}"
    if isinstance(e, InvalidMessageError):
        assert e.field is not None, f"no .field on {e!r}"


def test_put_never_panics(store_dir: Path) -> None:
    with MessageStore(
        store_dir, **SIDE_FILES, mapped_file_size_commit_log=256 * 1024, max_message_size=256
    ) as store:
        untyped = cast(Any, store)

        @SETTINGS
        @given(
            topic=topics,
            body=bodies,
            queue_id=queue_ids,
            tags=tags,
            keys=keys,
            properties=properties,
            flag=st.one_of(odd_ints, junk),
            born_timestamp=st.one_of(odd_ints, junk),
            born_host=hosts,
        )
        def run(**kwargs: Any) -> None:
            topic, body = kwargs.pop("topic"), kwargs.pop("body")
            try:
                r = untyped.put(topic, body, **kwargs)
            except BaseException as e:
                check_allowed(e)
                return
            m = store.look_message_by_offset(r.commitlog_offset)
            assert m.topic == topic
            assert m.body == bytes(body)
            assert m.queue_id == kwargs["queue_id"]
            if isinstance(kwargs["tags"], str):
                assert m.tags == kwargs["tags"]
            if isinstance(kwargs["properties"], dict):
                for k, v in kwargs["properties"].items():
                    assert m.properties[k] == v

        run()
        # The store is still consistent after everything the fuzzer threw at it.
        assert all(m.body is not None for m in store.scan(verify_crc=True))


def test_put_batch_dicts_never_panic(store_dir: Path) -> None:
    with MessageStore(
        store_dir, **SIDE_FILES, mapped_file_size_commit_log=256 * 1024, max_message_size=256
    ) as store:
        untyped = cast(Any, store)
        item = st.fixed_dictionaries(
            {"topic": topics, "body": bodies},
            optional={
                "queue_id": queue_ids,
                "tags": tags,
                "keys": keys,
                "properties": properties,
                "nope": junk,
            },
        )

        @SETTINGS
        @given(st.one_of(st.lists(item, max_size=5), junk, st.lists(junk, max_size=3)))
        def run(messages: Any) -> None:
            end = store.max_commitlog_offset()
            try:
                results = untyped.put_batch(messages)
            except BaseException as e:
                check_allowed(e)
                assert store.max_commitlog_offset() == end, "a refused batch wrote something"
                return
            assert len(results) == len(messages)

        run()


row = st.fixed_dictionaries(
    {
        "topic": st.one_of(valid_topics, any_text),
        "body": st.binary(max_size=300),
        "queue_id": st.integers(-3, 10),
        "tags": st.one_of(st.none(), any_text),
        "keys": st.one_of(st.none(), st.lists(any_text, max_size=3)),
        "properties": st.one_of(st.none(), st.dictionaries(any_text, any_text, max_size=3)),
    }
)


def to_table(rows: list[dict[str, Any]]) -> pa.Table:
    def col(name: str) -> list[Any]:
        return [r[name] for r in rows]

    return pa.table(
        {
            "topic": pa.array(col("topic"), pa.string()),
            "body": pa.array(col("body"), pa.binary()),
            "queue_id": pa.array(col("queue_id"), pa.int32()),
            "tags": pa.array(col("tags"), pa.string()),
            "keys": pa.array(col("keys"), pa.list_(pa.string())),
            "properties": pa.array(
                [None if p is None else list(p.items()) for p in col("properties")],
                pa.map_(pa.string(), pa.string()),
            ),
        }
    )


def test_arrow_and_dicts_agree(tmp_path: Path) -> None:
    """The same rows through both put_batch paths: same outcome, same stored messages."""
    config: dict[str, Any] = {
        **SIDE_FILES,
        "mapped_file_size_commit_log": 256 * 1024,
        "max_message_size": 256,
    }
    with MessageStore(tmp_path / "d", **config) as a, MessageStore(tmp_path / "a", **config) as b:

        @SETTINGS
        @given(st.lists(row, min_size=1, max_size=6))
        def run(rows: list[dict[str, Any]]) -> None:
            try:
                table = to_table(rows)
            except (pa.ArrowInvalid, UnicodeEncodeError):
                return  # not representable in Arrow (e.g. lone surrogates)
            outcome: list[Any] = []
            for put in (lambda: a.put_batch(rows), lambda: b.put_batch(table)):
                try:
                    put()
                    outcome.append(None)
                except BaseException as e:
                    check_allowed(e)
                    outcome.append((type(e), getattr(e, "field", None)))
            assert outcome[0] == outcome[1], (rows, outcome)

        run()
        strip = [
            (m.topic, m.body, m.queue_id, m.queue_offset, m.tags, m.keys, m.store_size)
            for m in a.scan()
        ]
        assert strip == [
            (m.topic, m.body, m.queue_id, m.queue_offset, m.tags, m.keys, m.store_size)
            for m in b.scan()
        ]


@pytest.mark.parametrize("n", [0, 1, 3])
def test_read_apis_never_panic(store_dir: Path, n: int) -> None:
    with MessageStore(store_dir, **SIDE_FILES, mapped_file_size_commit_log=64 * 1024) as store:
        for i in range(n):
            store.put("T", bytes([i]) * 10)
        untyped = cast(Any, store)

        @SETTINGS
        @given(
            offset=st.one_of(odd_ints, junk),
            verify=st.one_of(st.booleans(), junk),
            count=st.one_of(st.integers(-3, 5), junk),
        )
        def run(offset: Any, verify: Any, count: Any) -> None:
            for call in (
                lambda: untyped.look_message_by_offset(offset),
                lambda: list(untyped.scan(offset, verify_crc=verify)),
                lambda: untyped.scan().next_batch(count),
            ):
                try:
                    call()
                except BaseException as e:
                    check_allowed(e)

        run()
