"""Forensics on real stores (issue 14 items 1, 2, 3, 5): foreign topics, crashed writers, the
KEYS rule, half-message properties and quarantine recovery."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from tests.rmq_fixture import require_java, write_broker_store
from tests.test_errors import wait_dispatched

import rocketstore
from rocketstore import InvalidMessageError, MessageStore

FOREIGN = ("Tópico-中文-😀", "café.menu")

SMALL: dict[str, Any] = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 20 * 1024,
    "max_hash_slot_num": 1024,
    "max_index_num": 4096,
}


# ---- 1. topics outside the client's character set -------------------------------------


def test_foreign_topics_read_only_and_writable(tmp_path: Path) -> None:
    """A broker of another implementation wrote non-ASCII topics: every read serves them, a
    writable open keeps and dispatches them, and put still validates its own topics."""
    require_java()
    root = tmp_path / "broker"
    man = write_broker_store(root, "basic", foreign_topics=True)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for rec in man["records"]:
        by_topic.setdefault(rec["topic"], []).append(rec)
    assert set(FOREIGN) <= set(by_topic), sorted(by_topic)
    assert (root / "consumequeue" / FOREIGN[0]).is_dir()

    def check(store: MessageStore) -> None:
        assert {m.topic for m in store.scan()} == set(by_topic)
        for topic in FOREIGN:
            recs = by_topic[topic]
            for rec in recs:
                got = store.get_message(topic, rec["queue_id"], rec["queue_offset"], 1)
                assert [m.commitlog_offset for m in got.messages] == [rec["commitlog_offset"]]
                assert store.view_message_by_id(rec["msg_id"]).topic == topic
                if rec["uniq_key"]:
                    hits = store.query_message(topic, rec["uniq_key"])
                    assert [m.commitlog_offset for m in hits] == [rec["commitlog_offset"]]
            assert store.max_offset_in_queue(topic, recs[0]["queue_id"]) > 0

    with MessageStore(root, read_only=True) as ro:
        check(ro)
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    with MessageStore(copy) as rw:
        check(rw)
        assert rw.recovery_report["undispatchable_topics"] == []
        assert rw.put("TopicTest", b"after").ok
        with pytest.raises(InvalidMessageError) as e:
            rw.put(FOREIGN[0], b"refused: put keeps the client's validator")
        assert e.value.field == "topic"
    with MessageStore(copy, read_only=True) as again:
        check(again)


# ---- 2. read-only lookups after a crash ------------------------------------------------


def test_crashed_writer_read_only_answers_every_key(tmp_path: Path) -> None:
    """Abort file present and the index 80 records behind: query_message still finds every key
    of every record (index hits and the in-memory tail), and get/view keep working."""
    require_java()
    root = tmp_path / "crashed"
    man = write_broker_store(root, "basic", foreign_topics=True, abort=True, index_lag=80)
    assert (root / "abort").exists()
    records = man["records"]
    assert all(not r["indexed_keys"] for r in records[-80:])
    assert any(r["indexed_keys"] for r in records[:-80])
    with MessageStore(root, read_only=True) as store:
        assert store.recovery_report["abnormal"]
        for rec in records:
            keys = list(rec["keys"]) + ([rec["uniq_key"]] if rec["uniq_key"] else [])
            for key in keys:
                hits = store.query_message(rec["topic"], key, max_num=64)
                assert rec["commitlog_offset"] in [m.commitlog_offset for m in hits], key
            assert (
                store.view_message_by_id(rec["msg_id"]).commitlog_offset
                == (rec["commitlog_offset"])
            )
        # A key that no record carries is still an empty answer.
        assert store.query_message("TopicTest", "no-such-key") == []


# ---- 3. one rule for keys --------------------------------------------------------------


def test_keys_one_rule_on_every_path(tmp_path: Path) -> None:
    with MessageStore(tmp_path / "s", **SMALL) as store:
        a = store.put("T", b"str", keys="order-1 order-2")
        b = store.put("T", b"spaces kept", keys="  x  y ")
        c = store.put("T", b"list", keys=["order-3", "order-4"])
        (d,) = store.put_batch([{"topic": "T", "body": b"dict", "keys": "order-5 order-6"}])
        for bad in (["a b"], ["ok", "two words"]):
            with pytest.raises(InvalidMessageError, match="space") as e:
                store.put("T", b"x", keys=bad)
            assert e.value.field == "keys"
            with pytest.raises(InvalidMessageError, match="space"):
                store.put_batch([{"topic": "T", "body": b"x", "keys": bad}])
        stored = {
            r.commitlog_offset: store.look_message_by_offset(r.commitlog_offset)
            for r in (a, b, c, d)
        }
        assert stored[a.commitlog_offset].properties["KEYS"] == "order-1 order-2"
        assert stored[b.commitlog_offset].properties["KEYS"] == "  x  y "
        assert stored[c.commitlog_offset].properties["KEYS"] == "order-3 order-4"
        assert stored[d.commitlog_offset].properties["KEYS"] == "order-5 order-6"
        assert stored[b.commitlog_offset].keys == ["x", "y"]
        wait_dispatched(store)
        for key, r in [("order-2", a), ("y", b), ("order-4", c), ("order-6", d)]:
            hits = store.query_message("T", key)
            assert [m.commitlog_offset for m in hits] == [r.commitlog_offset], key


def test_prepared_records_carry_half_message_properties(tmp_path: Path) -> None:
    with MessageStore(tmp_path / "s", **SMALL) as store:
        half = store.put("T", b"h", transaction="prepared", producer_group="pg-orders")
        bare = store.put("T", b"h2", transaction="prepared")
        plain = store.put("T", b"p", producer_group="pg-orders")
        (dict_half,) = store.put_batch(
            [{"topic": "T", "body": b"h3", "transaction": "prepared", "producer_group": "pg"}]
        )
        props = {
            r.commitlog_offset: store.look_message_by_offset(r.commitlog_offset).properties
            for r in (half, bare, plain, dict_half)
        }
    assert props[half.commitlog_offset]["TRAN_MSG"] == "true"
    assert props[half.commitlog_offset]["PGROUP"] == "pg-orders"
    assert props[bare.commitlog_offset]["TRAN_MSG"] == "true"
    assert "PGROUP" not in props[bare.commitlog_offset]
    assert "TRAN_MSG" not in props[plain.commitlog_offset]
    assert "PGROUP" not in props[plain.commitlog_offset]
    assert props[dict_half.commitlog_offset]["PGROUP"] == "pg"


# ---- 5. quarantine ----------------------------------------------------------------------


def test_quarantine_mode_moves_damage_aside_and_opens(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as store:
        results = store.put_batch(
            [{"topic": "Q", "body": bytes(600), "keys": f"k{i}"} for i in range(300)]
        )
    size = SMALL["mapped_file_size_commit_log"]
    files = sorted((root / "commitlog").iterdir())
    assert len(files) >= 3
    # Damage a record in the middle of the second file: far below the durable offset.
    victim = next(r for r in results if r.commitlog_offset > size + size // 2)
    pos = victim.commitlog_offset % size
    path = root / "commitlog" / f"{victim.commitlog_offset // size * size:020d}"
    data = bytearray(path.read_bytes())
    data[pos + 4 : pos + 8] = struct.pack(">I", 0x12345678)  # magic code
    path.write_bytes(bytes(data))
    original = {p.name: p.read_bytes() for p in files}

    with pytest.raises(rocketstore.CorruptionError):
        MessageStore(root, **SMALL)
    with MessageStore(root, recovery_mode="quarantine", **SMALL) as store:
        report = store.recovery_report
        qdir = Path(report["quarantine_dir"])
        assert qdir.parent == root / "quarantine"
        assert store.max_commitlog_offset() == victim.commitlog_offset
        kept = [r for r in results if r.commitlog_offset < victim.commitlog_offset]
        assert len(list(store.scan())) == len(kept)
        assert store.get_message("Q", 0, len(kept) - 1, 1).messages[0].commitlog_offset == (
            kept[-1].commitlog_offset
        )
        assert store.put("Q", b"after").ok
        wait_dispatched(store)
    meta = json.loads((qdir / "report.json").read_text())
    assert meta["damage_offset"] == victim.commitlog_offset
    assert meta["recovered_end"] == victim.commitlog_offset
    assert meta["recovery_mode"] == "quarantine"
    moved = {Path(f["name"]).name for f in meta["files"]}
    assert moved == {p.name for p in files if p.name >= path.name}
    for name in moved:
        assert (qdir / name).read_bytes() == original[name], name
    # The quarantined store reopens cleanly in the default mode.
    with MessageStore(root, **SMALL) as store:
        assert store.recovery_report["quarantine_dir"] is None
