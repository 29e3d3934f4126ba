"""Stores written by another RocketMQ implementation open read-only and read back exactly.

The other implementation is the independent Java writer in tests/fixtures/java (it writes store
roots the way a broker does, with the JDK's own String.hashCode, CRC32 and HashMap). Each test
opens such a root with ``read_only=True``, scans every record, compares every field with the
writer's manifest, and checks that no byte of any file changed and no file appeared.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from tests.rmq_fixture import require_java, write_broker_store

import rocketstore


def _snapshot(root: Path) -> dict[str, tuple[int, str]]:
    out: dict[str, tuple[int, str]] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h = hashlib.sha256()
            with p.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            out[str(p.relative_to(root))] = (p.stat().st_size, h.hexdigest())
        else:
            out[str(p.relative_to(root))] = (-1, "dir")
    return out


def _expected_body(rec: dict[str, Any]) -> bytes:
    if rec.get("body_zero_fill"):
        return bytes(rec["body_len"])
    return base64.b64decode(rec["body_b64"])


def _check_scenario(root: Path, manifest: dict[str, Any]) -> None:
    before = _snapshot(root)
    # Index geometry is not recorded in the files: like a broker, pass non-default values.
    geometry = {
        "max_hash_slot_num": manifest["index_slots"],
        "max_index_num": manifest["index_entries"],
    }
    with rocketstore.MessageStore(root, read_only=True, **geometry) as store:
        messages = list(store.scan())
        records = manifest["records"]
        assert len(messages) == len(records)
        for m, rec in zip(messages, records, strict=True):
            assert m.commitlog_offset == rec["commitlog_offset"]
            assert m.topic == rec["topic"]
            assert m.queue_id == rec["queue_id"]
            assert m.queue_offset == rec["queue_offset"]
            assert m.store_size == rec["store_size"]
            assert m.body == _expected_body(rec)
            assert m.body_crc == rec["body_crc"]
            assert m.flag == rec["flag"]
            assert m.sys_flag == rec["sys_flag"]
            assert m.tags == rec["tags"]
            assert m.keys == rec["keys"]
            assert m.properties == rec["properties"]
            assert m.born_timestamp == rec["born_timestamp"]
            assert m.born_host == rec["born_host"]
            assert m.store_timestamp == rec["store_timestamp"]
            assert m.store_host == rec["store_host"]
            assert m.reconsume_times == rec["reconsume_times"]
            assert m.prepared_transaction_offset == rec["prepared_transaction_offset"]
            assert m.msg_id == rec["msg_id"]
            assert m.uniq_key == rec["uniq_key"]
        for rec in records[:: max(1, len(records) // 50)]:
            again = store.look_message_by_offset(rec["commitlog_offset"])
            assert again.commitlog_offset == rec["commitlog_offset"]
        assert store.max_commitlog_offset() == manifest["end_offset"]
        if manifest["scenario"] == "basic":
            _check_lookups(store, manifest)
        batches = []
        offset = 0
        while True:
            batch, offset = store.read_arrow(offset, max_messages=1000)
            if batch.num_rows == 0:
                break
            batches.append(batch)
        arrow_rows = [row for b in batches for row in b.to_pylist()]
        assert [(r["commitlog_offset"], r["topic"]) for r in arrow_rows] == [
            (rec["commitlog_offset"], rec["topic"]) for rec in records
        ]
    after = _snapshot(root)
    assert after == before, "a read-only open changed the store"
    assert not (root / "lock").exists() or (root / "lock").stat().st_size == 4


def _check_lookups(store: rocketstore.MessageStore, manifest: dict[str, Any]) -> None:
    """Every record through its queue, its offset message id, and every key it was sent with."""
    for rec in manifest["records"]:
        if not rec["dispatched"]:
            continue
        got = store.get_message(rec["topic"], rec["queue_id"], rec["queue_offset"], 1)
        assert [m.commitlog_offset for m in got.messages] == [rec["commitlog_offset"]], rec
        assert store.view_message_by_id(rec["msg_id"]).topic == rec["topic"]
        keys = list(rec["keys"]) + ([rec["uniq_key"]] if rec["uniq_key"] else [])
        for key in keys:
            hits = store.query_message(rec["topic"], key, max_num=64)
            assert rec["commitlog_offset"] in [m.commitlog_offset for m in hits], (
                f"{rec['topic']}#{key} not found (index_lag={manifest['index_lag']})"
            )
            assert all(m.topic == rec["topic"] for m in hits)
            assert all(key in m.keys or key == m.uniq_key for m in hits)


@pytest.mark.parametrize(
    ("scenario", "options"),
    [
        ("basic", {}),
        # Topics outside the client's character set (Tópico-中文-😀, café.menu), as other
        # implementations write them, and the crashed writer: abort file present, the last 60
        # records missing from the index (read-only still answers every key).
        ("basic", {"foreign_topics": True}),
        ("basic", {"foreign_topics": True, "abort": True, "index_lag": 60}),
        ("basic", {"stale_tail": True, "abort": True}),
        ("full", {}),
        ("full", {"seed": 7, "abort": True}),
        ("vectors", {}),
    ],
)
def test_foreign_store_reads_back_exactly(
    tmp_path: Path, scenario: str, options: dict[str, Any]
) -> None:
    require_java()
    root = tmp_path / "broker-store"
    manifest = write_broker_store(root, scenario, **options)
    _check_scenario(root, manifest)


def test_real_broker_sized_files(tmp_path: Path) -> None:
    """1 GiB commit log files, as a broker writes them (sparse here), open read-only."""
    require_java()
    root = tmp_path / "broker1g"
    manifest = write_broker_store(root, "broker1g")
    assert manifest["commitlog_file_size"] == 1 << 30
    assert len(manifest["commitlog_files"]) >= 2
    _check_scenario(root, manifest)
