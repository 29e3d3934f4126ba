"""Self-check of the Java broker-store writer (tests/fixtures/java/BrokerStoreWriter.java).

A small, independent pure-Python reader of the RocketMQ on-disk format (the spec:
rocketmq-store-format.md) decodes every file the writer produced and compares it with the writer's
manifest.json. It does not use the Rust engine. Checked per scenario:

* commitlog: file names/sizes, every record per spec section 3 (TOTALSIZE recomputed, magic V1/V2
  rule, BODYCRC, PHYSICALOFFSET, host widths from SYSFLAG), the END_FILE rule and blank records,
  bytes after the end of data (zeros, or stale bytes that never validate), non-decreasing
  STORETIMESTAMP;
* consume queues: contiguous full-size files, pre-fill units, each unit points at a record with
  matching size, queue offset, topic, queue id, transaction type and tagsCode (recomputed, including
  the delay rule);
* index: an independent simulation of IndexService.buildIndex/IndexFile.putKey is compared with the
  header, the hash slots and the entries of every index file; every indexed key is found by walking
  its hash chain; file names are SimpleDateFormat-style local times;
* checkpoint, abort, lock and config files;
* the spec section 16 test vectors 7, 8, 11, 12, 13, 14 and 15, byte for byte.

The Java store loader (tests/fixtures/java/BrokerStoreReader.java, used on stores rocketstore
wrote) is checked here against the writer too: it loads the writer's roots with no problem and
the manifest's records, and finds a damaged record.
"""

from __future__ import annotations

import array
import base64
import datetime as dt
import errno
import hashlib
import ipaddress
import itertools
import json
import os
import re
import struct
import sys
import zlib
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.rmq_fixture import (
    JavaFixtureError,
    compiled_classes,
    load_broker_store,
    require_java,
    write_broker_store,
)


@pytest.fixture(autouse=True)
def _needs_java() -> None:
    require_java()  # skip without Java (fail when CI=true)


MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB
BLANK_MAGIC = 0xCBD43194
CQ_UNIT = 20
INDEX_HEADER = 40
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TX_MASK = 0xC
TX_PREPARED = 0x4
TX_COMMIT = 0x8
TX_ROLLBACK = 0xC
DELAY_MS = [
    1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000,
    360_000, 420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
]  # fmt: skip
BIG_RECORD = 1 << 20


# --------------------------------------------------------------------------------------
# Format helpers
# --------------------------------------------------------------------------------------


def java_hash(s: str) -> int:
    """Java String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def index_key_hash(key: str) -> int:
    h = abs(java_hash(key))
    return 0 if h >= 1 << 31 else h  # abs(Integer.MIN_VALUE) stays negative in Java -> 0


def crc_masked(data: bytes) -> int:
    return zlib.crc32(data) & 0x7FFFFFFF


def parse_properties(s: str) -> dict[str, str]:
    """string2messageProperties: split on 0x02, key/value both non-empty, later keys win."""
    out: dict[str, str] = {}
    for seg in s.split("\x02"):
        if len(seg) < 3:
            continue
        kv = seg.find("\x01")
        if 0 < kv < len(seg) - 1:
            out[seg[:kv]] = seg[kv + 1 :]
    return out


def java_hashmap_bucket(key: str, capacity: int) -> int:
    """Bucket of ``key`` in a java.util.HashMap table: (h ^ (h >>> 16)) & (capacity - 1)."""
    h = java_hash(key) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def property_keys(properties_string: str) -> list[str]:
    return [seg.split("\x01", 1)[0] for seg in properties_string.split("\x02") if seg]


def in_hashmap_order(properties_string: str, capacity: int) -> bool:
    """True if the keys could come from iterating a HashMap of ``capacity`` (buckets ascending)."""
    buckets = [java_hashmap_bucket(k, capacity) for k in property_keys(properties_string)]
    return buckets == sorted(buckets)


# Records whose properties string is given verbatim by a spec test vector, not built from a map.
VERBATIM_PROPERTIES = {"vector7", "vector12", "vector14", "vector15", "filler"}


def check_property_order(kind: str, properties_string: str) -> None:
    """The broker serializes HashMap(128)s; clients serialize default (capacity 16) HashMaps."""
    if kind in VERBATIM_PROPERTIES:
        return
    if kind == "op":  # TransactionalMessageBridge: a client-style Message map
        assert in_hashmap_order(properties_string, 16), kind
    elif kind == "batch":  # client-serialized inner properties + the broker's envelope properties
        cut = properties_string.rindex("UNIQ_KEY\x01")
        assert in_hashmap_order(properties_string[:cut], 16), kind
        assert in_hashmap_order(properties_string[cut:], 128), kind
    else:
        assert in_hashmap_order(properties_string, 128), f"{kind}: {properties_string!r}"


def key_tokens(keys: str | None) -> list[str]:
    return [t for t in (keys or "").split(" ") if t]


def tags_code(topic: str, props: dict[str, str], store_ts: int) -> int:
    code = 0
    tags = props.get("TAGS")
    if tags:
        code = java_hash(tags)
    delay = props.get("DELAY")
    if topic == SCHEDULE_TOPIC and delay is not None:
        level = min(int(delay), 18)
        if level > 0:
            code = store_ts + DELAY_MS[level - 1]
    return code


def host_text(ip: bytes, port: int) -> str:
    if len(ip) == 4:
        return f"{ipaddress.IPv4Address(ip)}:{port}"
    return f"[{ipaddress.IPv6Address(ip).compressed}]:{port}"


def same_host(manifest_text: str, ip: bytes, port: int) -> bool:
    if manifest_text.startswith("["):
        addr, _, port_s = manifest_text[1:].partition("]:")
    else:
        addr, _, port_s = manifest_text.rpartition(":")
    return ipaddress.ip_address(addr) == ipaddress.ip_address(ip) and int(port_s) == port


def range_is_zero(fd: int, start: int, end: int) -> bool:
    """True if [start, end) reads as zeros; holes are skipped with SEEK_DATA/SEEK_HOLE."""
    pos = start
    while pos < end:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:
                return True
            raise
        if data >= end:
            return True
        try:
            hole = os.lseek(fd, data, os.SEEK_HOLE)
        except OSError:
            hole = end
        stop = min(max(hole, data + 1), end)
        p = max(data, pos)
        while p < stop:
            n = min(1 << 20, stop - p)
            if os.pread(fd, n, p).count(0) != n:
                return False
            p += n
        pos = stop
    return True


_ZERO_CRC: dict[int, int] = {}


def zero_crc(n: int) -> int:
    if n not in _ZERO_CRC:
        _ZERO_CRC[n] = crc_masked(bytes(n))
    return _ZERO_CRC[n]


# --------------------------------------------------------------------------------------
# Commitlog decoding
# --------------------------------------------------------------------------------------


@dataclass
class Record:
    phy: int
    total: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_ts: int
    born_ip: bytes
    born_port: int
    store_ts: int
    store_ip: bytes
    store_port: int
    reconsume: int
    prepared: int
    body_len: int
    body: bytes | None  # None: a large all-zero body (verified, not kept)
    computed_body_crc: int
    topic: str
    properties_string: str
    props: dict[str, str] = field(default_factory=dict)

    @property
    def tran(self) -> int:
        return self.sys_flag & TX_MASK

    @property
    def msg_id(self) -> str:
        return (
            (self.store_ip + struct.pack(">iq", self.store_port, self.physical_offset))
            .hex()
            .upper()
        )

    def expected_index_keys(self) -> list[str]:
        if self.tran == TX_ROLLBACK:
            return []
        keys = []
        uniq = self.props.get("UNIQ_KEY")
        if uniq is not None:
            keys.append(f"{self.topic}#{uniq}")
        keys += [f"{self.topic}#{k}" for k in key_tokens(self.props.get("KEYS"))]
        return keys


def decode_record(fd: int, pos: int, phy: int, total: int) -> Record:
    """Decode the record of TOTALSIZE ``total`` at file position ``pos`` (spec section 3.2)."""
    small = total <= BIG_RECORD
    buf = os.pread(fd, total if small else 128, pos)
    assert len(buf) == (total if small else 128), "short read"
    _, magic, body_crc, queue_id, flag = struct.unpack_from(">iIiii", buf, 0)
    queue_offset, physical_offset, sys_flag, born_ts = struct.unpack_from(">qqiq", buf, 20)
    o = 48
    born_len = 16 if sys_flag & 0x10 else 4
    born_ip = buf[o : o + born_len]
    (born_port,) = struct.unpack_from(">i", buf, o + born_len)
    o += born_len + 4
    (store_ts,) = struct.unpack_from(">q", buf, o)
    o += 8
    store_len = 16 if sys_flag & 0x20 else 4
    store_ip = buf[o : o + store_len]
    (store_port,) = struct.unpack_from(">i", buf, o + store_len)
    o += store_len + 4
    reconsume, prepared, body_len = struct.unpack_from(">iqi", buf, o)
    o += 16
    assert 0 <= body_len <= total
    body: bytes | None
    if small:
        body = buf[o : o + body_len]
        computed_crc = crc_masked(body)
        tail = buf[o + body_len :]
    else:
        assert range_is_zero(fd, pos + o, pos + o + body_len), "large body is not zero-filled"
        body = None
        computed_crc = zero_crc(body_len)
        tail = os.pread(fd, total - o - body_len, pos + o + body_len)
    t = 0
    if magic == MAGIC_V2:
        (topic_len,) = struct.unpack_from(">h", tail, 0)
        t = 2
    else:
        (topic_len,) = struct.unpack_from(">b", tail, 0)
        t = 1
    assert topic_len >= 0
    topic = tail[t : t + topic_len].decode("utf-8")
    t += topic_len
    (prop_len,) = struct.unpack_from(">h", tail, t)
    t += 2
    assert prop_len >= 0
    props_string = tail[t : t + prop_len].decode("utf-8")
    t += prop_len
    assert t == len(tail), "record has trailing bytes"
    computed_total = (
        72 + (born_len + 4) + (store_len + 4) + body_len + (2 if magic == MAGIC_V2 else 1)
        + topic_len + 2 + prop_len
    )  # fmt: skip
    assert computed_total == total, f"TOTALSIZE {total} != computed {computed_total} at {phy}"
    return Record(
        phy=phy,
        total=total,
        magic=magic,
        body_crc=body_crc,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        sys_flag=sys_flag,
        born_ts=born_ts,
        born_ip=born_ip,
        born_port=born_port,
        store_ts=store_ts,
        store_ip=store_ip,
        store_port=store_port,
        reconsume=reconsume,
        prepared=prepared,
        body_len=body_len,
        body=body,
        computed_body_crc=computed_crc,
        topic=topic,
        properties_string=props_string,
        props=parse_properties(props_string),
    )


@dataclass
class CommitLogScan:
    records: list[Record]
    blanks: list[tuple[int, int]]


def scan_commitlog(root: Path, man: dict[str, Any]) -> CommitLogScan:
    fs: int = man["commitlog_file_size"]
    cl = root / "commitlog"
    names = sorted(os.listdir(cl))
    assert names == man["commitlog_files"]
    assert names, "no commitlog files"
    for i, name in enumerate(names):
        assert re.fullmatch(r"\d{20}", name)
        assert int(name) == i * fs, "commitlog files must be contiguous from 0"
        assert (cl / name).stat().st_size == fs, "commitlog files are created full size"
    fds = [os.open(cl / n, os.O_RDONLY) for n in names]
    try:
        end: int = man["end_offset"]
        records: list[Record] = []
        blanks: list[tuple[int, int]] = []
        off = 0
        while off < end:
            fi, pos = divmod(off, fs)
            total, magic = struct.unpack(">iI", os.pread(fds[fi], 8, pos))
            if magic == BLANK_MAGIC:
                assert total == fs - pos, "blank TOTALSIZE must be the rest of the file"
                blanks.append((off, total))
                off = (fi + 1) * fs
                continue
            assert magic in (MAGIC_V1, MAGIC_V2), f"bad magic {magic:#x} at {off}"
            assert total + 8 <= fs - pos, "END_FILE rule: at least 8 bytes remain after a record"
            rec = decode_record(fds[fi], pos, off, total)
            records.append(rec)
            off += total
        assert off == end, "records must end exactly at end_offset"
        # every non-last file ends with a blank; the last file has none
        assert [b[0] // fs for b in blanks] == list(range(len(names) - 1))
        # the bytes after the end never validate as a record or a blank
        last_pos = end % fs if end // fs == len(names) - 1 else None
        assert last_pos is not None, "end_offset must be inside the last file"
        if last_pos + 8 <= fs:
            _, magic = struct.unpack(">iI", os.pread(fds[-1], 8, last_pos))
            assert magic not in (MAGIC_V1, MAGIC_V2, BLANK_MAGIC)
        # stale bytes (TransientStorePool reuse / unspecified tail) or zeros
        stale = {r["offset"]: r["length"] for r in man["stale_regions"]}
        if man["stale_tail"]:
            expected_starts = {b[0] + 8 for b in blanks if b[1] > 8}
            if last_pos < fs:
                expected_starts.add(end)
            assert set(stale) == expected_starts
            for start, length in stale.items():
                fi, pos = divmod(start, fs)
                assert not range_is_zero(fds[fi], pos, pos + length), "stale bytes must be non-zero"
        else:
            assert not stale
            for b_off, b_size in blanks:
                fi, pos = divmod(b_off, fs)
                assert range_is_zero(fds[fi], pos + 8, pos + b_size)
            assert range_is_zero(fds[-1], last_pos, fs)
        return CommitLogScan(records, blanks)
    finally:
        for fd in fds:
            os.close(fd)


def check_records_against_manifest(scan: CommitLogScan, man: dict[str, Any]) -> None:
    mrecs: list[dict[str, Any]] = man["records"]
    assert len(scan.records) == len(mrecs)
    assert [{"offset": o, "size": s} for o, s in scan.blanks] == man["blanks"]
    # END_FILE rule seen from the blank: the record after it did not fit (TOTALSIZE + 8 > blank)
    fs: int = man["commitlog_file_size"]
    batch_size: dict[int, int] = defaultdict(int)  # batch id -> cumulative record size
    for m in mrecs:
        if m["batch_id"] is not None:
            batch_size[m["batch_id"]] += m["store_size"]
    first_in_file = {m["commitlog_offset"] // fs: m for m in reversed(mrecs)}
    for b_off, b_size in scan.blanks:
        nxt = first_in_file[b_off // fs + 1]
        assert nxt["commitlog_offset"] % fs == 0
        # a batch is rolled over whole, so the test is on its cumulative size
        size = nxt["store_size"] if nxt["batch_id"] is None else batch_size[nxt["batch_id"]]
        assert size + 8 > b_size, f"record at {nxt['commitlog_offset']} would have fit"
    last_ts = 0
    next_offset: dict[tuple[str, int], int] = {}
    for rec, m in zip(scan.records, mrecs, strict=True):
        where = f"record at {rec.phy} ({m['kind']})"
        assert rec.physical_offset == rec.phy == m["commitlog_offset"], where
        assert rec.total == m["store_size"], where
        assert (rec.topic, rec.queue_id) == (m["topic"], m["queue_id"]), where
        assert rec.magic == (MAGIC_V2 if len(rec.topic) > 127 else MAGIC_V1), where
        assert m["magic_version"] == (2 if rec.magic == MAGIC_V2 else 1), where
        assert rec.body_crc == rec.computed_body_crc == m["body_crc"], where
        assert rec.body_len == m["body_len"], where
        if m["body_zero_fill"]:
            assert m["body_b64"] is None
            assert rec.body is None or rec.body == bytes(rec.body_len), where
        else:
            assert rec.body == base64.b64decode(m["body_b64"]), where
        assert (rec.flag, rec.sys_flag) == (m["flag"], m["sys_flag"]), where
        assert rec.queue_offset == m["queue_offset"], where
        assert (rec.born_ts, rec.store_ts) == (m["born_timestamp"], m["store_timestamp"]), where
        assert same_host(m["born_host"], rec.born_ip, rec.born_port), where
        assert same_host(m["store_host"], rec.store_ip, rec.store_port), where
        assert m["born_host"] == host_text(rec.born_ip, rec.born_port), where
        assert m["store_host"] == host_text(rec.store_ip, rec.store_port), where
        assert bool(rec.sys_flag & 0x10) == (len(rec.born_ip) == 16), where
        assert rec.reconsume == m["reconsume_times"], where
        assert rec.prepared == m["prepared_transaction_offset"], where
        assert rec.properties_string == m["properties_string"], where
        check_property_order(m["kind"], rec.properties_string)
        assert rec.props == m["properties"], where
        assert rec.props.get("TAGS") == m["tags"], where
        assert key_tokens(rec.props.get("KEYS")) == m["keys"], where
        assert rec.props.get("UNIQ_KEY") == m["uniq_key"], where
        assert rec.msg_id == m["msg_id"], where
        assert len(m["msg_id"]) == (32 if len(rec.store_ip) == 4 else 56), where
        assert tags_code(rec.topic, rec.props, rec.store_ts) == m["tags_code"], where
        assert m["dispatched"] == (rec.tran in (0, TX_COMMIT)), where
        assert rec.expected_index_keys() == m["indexed_keys"], where
        assert rec.store_ts >= last_ts, f"{where}: STORETIMESTAMP went backwards"
        last_ts = rec.store_ts
        if rec.tran in (TX_PREPARED, TX_ROLLBACK):
            assert rec.queue_offset == 0, where
        else:
            key = (rec.topic, rec.queue_id)
            start: int = man["queues"][rec.topic][str(rec.queue_id)]["min"]
            assert rec.queue_offset == next_offset.get(key, start), (
                f"{where}: queue offsets must be dense"
            )
            next_offset[key] = rec.queue_offset + 1
        if rec.tran == TX_COMMIT and m["kind"] == "commit":
            half = next(r for r in scan.records if r.phy == rec.prepared)
            assert (half.topic, half.tran) == ("RMQ_SYS_TRANS_HALF_TOPIC", 0), where
            assert half.properties_string == rec.properties_string, where


# --------------------------------------------------------------------------------------
# Consume queues
# --------------------------------------------------------------------------------------


def check_consume_queues(root: Path, man: dict[str, Any], records: list[Record]) -> None:
    unit_count: int = man["cq_units_per_file"]
    fsz = unit_count * CQ_UNIT
    by_phy = {r.phy: r for r in records}
    per_queue: dict[tuple[str, int], list[Record]] = defaultdict(list)
    for r in records:
        if r.tran in (0, TX_COMMIT):
            per_queue[(r.topic, r.queue_id)].append(r)
    cq_root = root / "consumequeue"
    on_disk = {(t, int(q)) for t in os.listdir(cq_root) for q in os.listdir(cq_root / t)}
    in_manifest = {(t, int(q)) for t, qs in man["queues"].items() for q in qs}
    assert on_disk == in_manifest == set(per_queue)
    for (topic, qid), recs in per_queue.items():
        info = man["queues"][topic][str(qid)]
        qdir = cq_root / topic / str(qid)
        names = sorted(os.listdir(qdir))
        assert names == info["files"]
        first = int(names[0])
        for i, fname in enumerate(names):
            assert int(fname) == first + i * fsz
            assert len(fname) == 20
            assert (qdir / fname).stat().st_size == fsz
        qmin, qmax, prefill = info["min"], info["max"], info["prefill"]
        assert first == qmin * CQ_UNIT - (qmin * CQ_UNIT) % fsz, "first file holds the first offset"
        assert first // CQ_UNIT + prefill == qmin
        assert qmax - qmin == len(recs)
        used = qmax * CQ_UNIT - first
        data = bytearray()
        for fname in names:
            with open(qdir / fname, "rb") as fh:
                data += fh.read(min(fsz, used + CQ_UNIT - len(data)))
        blank = struct.pack(">qiq", 0, 0x7FFFFFFF, 0)
        for i in range(prefill):
            assert data[i * CQ_UNIT : (i + 1) * CQ_UNIT] == blank, (
                f"{topic}/{qid}: pre-fill unit {i}"
            )
        for n, rec in enumerate(recs, start=qmin):
            p = n * CQ_UNIT - first
            phy, size, tag = struct.unpack_from(">qiq", data, p)
            target = by_phy[phy]
            assert target is rec, f"{topic}/{qid}@{n}: unit points at the wrong record"
            assert size == rec.total
            assert rec.queue_offset == n
            assert rec.topic == topic
            assert rec.queue_id == qid
            assert rec.tran in (0, TX_COMMIT)
            assert tag == tags_code(rec.topic, rec.props, rec.store_ts)
        tail = bytes(data[used : used + CQ_UNIT])
        assert tail == bytes(len(tail)), f"{topic}/{qid}: bytes after the last unit must be zero"


# --------------------------------------------------------------------------------------
# Index
# --------------------------------------------------------------------------------------


@dataclass
class SimIndexFile:
    name_time: int
    begin_ts: int = 0
    end_ts: int = 0
    begin_phy: int = 0
    end_phy: int = 0
    slot_count: int = 0
    count: int = 1
    slots: dict[int, int] = field(default_factory=dict)
    entries: list[tuple[int, int, int, int]] = field(default_factory=list)


@dataclass
class SimIndex:
    files: list[SimIndexFile]
    checkpoint_ts: int


def simulate_index(records: list[Record], slots: int, cap: int) -> SimIndex:
    files: list[SimIndexFile] = []
    state = {"checkpoint": 0, "last_name": -(1 << 62)}

    def last_file(now: int) -> SimIndexFile:
        if files and files[-1].count < cap:
            return files[-1]
        t = max(now, state["last_name"] + 1)
        state["last_name"] = t
        f = SimIndexFile(name_time=t)
        if files:
            prev = files[-1]
            if prev.end_phy > 0:
                f.begin_phy = f.end_phy = prev.end_phy
            if prev.end_ts > 0:
                f.begin_ts = f.end_ts = prev.end_ts
            state["checkpoint"] = prev.end_ts
        files.append(f)
        return f

    def put(f: SimIndexFile, key: str, phy: int, ts: int) -> bool:
        if f.count >= cap:
            return False
        h = index_key_hash(key)
        slot = h % slots
        prev = f.slots.get(slot, 0)
        if prev <= 0 or prev > f.count:
            prev = 0
        # Java: (ts - begin) / 1000 truncates; negative results are clamped to 0 either way
        diff = 0 if f.begin_ts <= 0 else min(max((ts - f.begin_ts) // 1000, 0), 2**31 - 1)
        f.entries.append((h, phy, diff, prev))
        f.slots[slot] = f.count
        if f.count <= 1:
            f.begin_phy, f.begin_ts = phy, ts
        if prev == 0:
            f.slot_count += 1
        f.count += 1
        f.end_phy, f.end_ts = phy, ts
        return True

    for r in records:
        f = last_file(r.store_ts)
        if r.phy < f.end_phy or r.tran == TX_ROLLBACK:
            continue
        for key in r.expected_index_keys():
            while not put(f, key, r.phy, r.store_ts):
                f = last_file(r.store_ts)
    return SimIndex(files, state["checkpoint"])


def read_nonzero_slots(fd: int, slots: int) -> dict[int, int]:
    """All non-zero hash slots; holes in the (sparse) slot table are skipped."""
    out: dict[int, int] = {}
    start, end = INDEX_HEADER, INDEX_HEADER + slots * 4
    pos = start
    while pos < end:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:
                break
            raise
        if data >= end:
            break
        try:
            hole = os.lseek(fd, data, os.SEEK_HOLE)
        except OSError:
            hole = end
        lo = max(pos, data)
        lo -= (lo - start) % 4
        hi = min(max(hole, lo + 4), end)
        hi += (-(hi - start)) % 4
        hi = min(hi, end)
        arr = array.array("I")
        arr.frombytes(os.pread(fd, hi - lo, lo))
        if sys.byteorder == "little":
            arr.byteswap()
        base = (lo - start) // 4
        for i, v in enumerate(arr):
            if v:
                out[base + i] = v
        pos = hi
    return out


def check_index(root: Path, man: dict[str, Any], records: list[Record], tz: str | None) -> SimIndex:
    slots: int = man["index_slots"]
    cap: int = man["index_entries"]
    sim = simulate_index(records, slots, cap)
    idx = root / "index"
    names = sorted(os.listdir(idx))
    assert names == man["index_files"]
    assert len(names) == len(set(names)) == len(sim.files)
    assert [f.name_time for f in sim.files] == man["index_file_times"]
    for name, t in zip(names, man["index_file_times"], strict=True):
        assert re.fullmatch(r"\d{17}", name)
        if tz is not None:
            from zoneinfo import ZoneInfo

            local = dt.datetime.fromtimestamp(t / 1000, ZoneInfo(tz))
            assert name == local.strftime("%Y%m%d%H%M%S") + f"{t % 1000:03d}"
    size = INDEX_HEADER + slots * 4 + cap * 20
    entries_at = INDEX_HEADER + slots * 4
    for name, f in zip(names, sim.files, strict=True):
        path = idx / name
        assert path.stat().st_size == size
        fd = os.open(path, os.O_RDONLY)
        try:
            header = struct.unpack(">qqqqii", os.pread(fd, INDEX_HEADER, 0))
            assert header == (
                f.begin_ts,
                f.end_ts,
                f.begin_phy,
                f.end_phy,
                f.slot_count,
                f.count,
            ), name
            assert os.pread(fd, 20, entries_at) == bytes(20), "entry #0 is never used"
            raw = os.pread(fd, (f.count - 1) * 20, entries_at + 20)
            got = [struct.unpack_from(">iqii", raw, i * 20) for i in range(f.count - 1)]
            assert got == f.entries, name
            if f.count < cap:
                assert os.pread(fd, 20, entries_at + f.count * 20) == bytes(20)
            disk_slots = read_nonzero_slots(fd, slots)
            assert disk_slots == f.slots, name
            # every key put into this file is reachable through its hash chain
            for n, (h, phy, _, _) in enumerate(got, start=1):
                cur = disk_slots[h % slots]
                seen = []
                while cur > 0:
                    seen.append(cur)
                    eh, ephy, _, eprev = got[cur - 1]
                    if (eh, ephy) == (h, phy) and cur == n:
                        break
                    assert 0 <= eprev < cur, "chains visit strictly decreasing entries"
                    cur = eprev
                else:
                    pytest.fail(f"{name}: entry #{n} not reachable from its slot (visited {seen})")
        finally:
            os.close(fd)
    return sim


# --------------------------------------------------------------------------------------
# Checkpoint, misc files
# --------------------------------------------------------------------------------------


def check_checkpoint_and_files(
    root: Path, man: dict[str, Any], records: list[Record], sim: SimIndex
) -> None:
    cp = (root / "checkpoint").read_bytes()
    assert len(cp) == 4096
    physic, logics, index_ts, master, confirm = struct.unpack_from(">qqqqq", cp, 0)
    assert cp[40:] == bytes(4096 - 40)
    assert physic == records[-1].store_ts
    assert logics == [r for r in records if r.tran in (0, TX_COMMIT)][-1].store_ts
    assert index_ts == sim.checkpoint_ts
    assert (master, confirm) == (0, 0)
    assert man["checkpoint"] == {
        "physic_msg_timestamp": physic,
        "logics_msg_timestamp": logics,
        "index_msg_timestamp": index_ts,
        "master_flushed_offset": 0,
        "confirm_phy_offset": 0,
    }
    assert (root / "lock").read_bytes() == b"lock"
    if man["abort"]:
        assert re.fullmatch(rb"\d+", (root / "abort").read_bytes())
    else:
        assert not (root / "abort").exists()
    topics_json = (root / "config" / "topics.json").read_text(encoding="utf-8")
    table = json.loads(topics_json)["topicConfigTable"]
    assert {r.topic for r in records} <= set(table)
    offsets_text = (root / "config" / "consumerOffset.json").read_text(encoding="utf-8")
    # fastjson writes Integer map keys unquoted: {0:12,1:7}
    assert re.search(r"\{\d+:\d+", offsets_text) or not man["consumer_offsets"]
    quoted = re.sub(r"([{,])(\d+):", r'\1"\2":', offsets_text)
    assert json.loads(quoted)["offsetTable"] == man["consumer_offsets"]
    for key, per_queue in man["consumer_offsets"].items():
        topic = key.split("@", 1)[0]
        for qid, off in per_queue.items():
            q = man["queues"][topic][qid]
            assert q["min"] <= off <= q["max"]


# --------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    root: Path
    man: dict[str, Any]
    scan: CommitLogScan
    tz: str | None


CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "basic": ("basic", {}),
    "basic-small-files": (
        "basic",
        {
            "seed": 3,
            "messages": 150,
            "commitlog_file_size": 8192,
            "cq_units_per_file": 8,
            "index_slots": 13,
            "index_entries": 30,
            "stale_tail": True,
            "abort": True,
        },
    ),
    "full": ("full", {"timezone": "Asia/Shanghai"}),
    "broker1g": ("broker1g", {"messages": 2000}),
    "vectors": ("vectors", {}),
    "vectors-delay": ("vectors-delay", {}),
    "vectors-index": ("vectors-index", {}),
}

_CACHE: dict[str, Case] = {}
_PENDING: dict[str, tuple[Path, Future[dict[str, Any]]]] = {}


def get_case(name: str, tmp_path_factory: pytest.TempPathFactory) -> Case:
    """The store root of one case, written once per session and scanned once.

    On first use every case is started at once (each is a separate JVM, so they run in parallel);
    the scan of the commitlog happens when a case is first needed.
    """
    if not _PENDING:
        compiled_classes()  # compile once, before the parallel runs
        pool = ThreadPoolExecutor(max_workers=4)
        for case_name, (scenario, opts) in CASES.items():
            root = tmp_path_factory.mktemp(case_name) / "store"
            _PENDING[case_name] = (root, pool.submit(write_broker_store, root, scenario, **opts))
        pool.shutdown(wait=False)
    if name not in _CACHE:
        scenario, opts = CASES[name]
        root, future = _PENDING[name]
        man = future.result()
        assert man["scenario"] == scenario
        tz: str | None = opts.get("timezone", "UTC")
        _CACHE[name] = Case(name, root, man, scan_commitlog(root, man), tz)
    return _CACHE[name]


@pytest.fixture(params=list(CASES))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Case:
    name: str = request.param
    return get_case(name, tmp_path_factory)


# --------------------------------------------------------------------------------------
# Generic tests
# --------------------------------------------------------------------------------------


def test_commitlog_records_match_manifest(case: Case) -> None:
    check_records_against_manifest(case.scan, case.man)


def test_consume_queues(case: Case) -> None:
    check_consume_queues(case.root, case.man, case.scan.records)


def test_index_files(case: Case) -> None:
    check_index(case.root, case.man, case.scan.records, case.tz)


def test_checkpoint_and_metadata_files(case: Case) -> None:
    sim = simulate_index(case.scan.records, case.man["index_slots"], case.man["index_entries"])
    check_checkpoint_and_files(case.root, case.man, case.scan.records, sim)


# --------------------------------------------------------------------------------------
# Scenario-specific tests
# --------------------------------------------------------------------------------------


def test_basic_rolls_several_files(tmp_path_factory: pytest.TempPathFactory) -> None:
    c = get_case("basic", tmp_path_factory)
    assert c.man["commitlog_file_size"] == 64 * 1024
    assert len(c.man["commitlog_files"]) >= 3
    assert len(c.scan.records) == 300
    assert any(r.sys_flag & 0x1 for r in c.scan.records), "some bodies are compressed"
    assert any(java_hash(r.props.get("TAGS", "x")) < 0 for r in c.scan.records)


def test_full_covers_every_feature(tmp_path_factory: pytest.TempPathFactory) -> None:
    c = get_case("full", tmp_path_factory)
    recs, man = c.scan.records, c.man
    kinds = {m["kind"] for m in man["records"]}
    assert {"half", "commit", "op", "batch", "delay_schedule", "delay_redelivered", "prepared",
            "rollback", "retry_redelivered", "dlq"} <= kinds  # fmt: skip
    assert any(r.magic == MAGIC_V2 for r in recs)
    assert any(r.sys_flag & 0x10 for r in recs)
    assert any(r.sys_flag & 0x20 for r in recs)
    assert any(r.sys_flag & 0x10 == 0 for r in recs)
    assert any(r.sys_flag & 0x20 == 0 for r in recs)
    assert len(man["index_files"]) >= 3
    # the first-entry quirk is visible: some later index file's entry #1 has timeDiff > 0, measured
    # from the previous file's endTimestamp
    sim = simulate_index(recs, man["index_slots"], man["index_entries"])
    assert any(f.entries[0][2] > 0 for f in sim.files[1:])
    assert man["stale_tail"]
    assert man["stale_regions"]
    # pre-filled queue whose earlier CQ files do not exist
    pf = man["queues"]["PrefillTopic"]["0"]
    assert pf["prefill"] > 0
    assert int(pf["files"][0]) > 0
    # delay: SCHEDULE_TOPIC_XXXX queue = level - 1, and the re-delivered copy keeps DELAY/REAL_*
    for r in recs:
        if r.topic == SCHEDULE_TOPIC:
            assert r.queue_id == int(r.props["DELAY"]) - 1
    by_uniq = defaultdict(list)
    for r in recs:
        by_uniq[r.props.get("UNIQ_KEY")].append(r)
    redelivered = [
        (r, m)
        for r, m in zip(recs, man["records"], strict=True)
        if m["kind"] == "delay_redelivered"
    ]
    assert redelivered
    for r, _ in redelivered:
        sched = [s for s in by_uniq[r.props["UNIQ_KEY"]] if s.topic == SCHEDULE_TOPIC]
        assert len(sched) == 1
        assert r.properties_string == sched[0].properties_string
        assert {"DELAY", "REAL_TOPIC", "REAL_QID"} <= set(r.props)
        assert r.store_ts >= sched[0].store_ts + DELAY_MS[int(r.props["DELAY"]) - 1]
    # transactions
    for r, m in zip(recs, man["records"], strict=True):
        if m["kind"] == "half":
            assert r.topic == "RMQ_SYS_TRANS_HALF_TOPIC"
            assert r.tran == 0
            assert r.queue_id == 0
            assert r.props["TRAN_MSG"] == "true"
            assert r.props["__transactionId__"] == r.props["UNIQ_KEY"]
            assert {"REAL_TOPIC", "REAL_QID"} <= set(r.props)
        elif m["kind"] == "op":
            assert r.props == {"TAGS": "d", "WAIT": "true"}
            assert r.body is not None
            assert re.fullmatch(rb"\d+,", r.body)
            assert r.sys_flag & ~0x30 == 0
        elif m["kind"] == "rollback":
            assert r.tran == TX_ROLLBACK
            assert m["indexed_keys"] == []
            assert not m["dispatched"]
        elif m["kind"] == "prepared":
            assert r.tran == TX_PREPARED
            assert m["indexed_keys"]
            assert not m["dispatched"]
    # batches: two UNIQ_KEYs in the bytes, the envelope's (last) one wins and is indexed
    batches = [(r, m) for r, m in zip(recs, man["records"], strict=True) if m["kind"] == "batch"]
    assert batches
    for r, m in batches:
        assert r.properties_string.count("UNIQ_KEY\x01") == 2
        last = r.properties_string.rsplit("UNIQ_KEY\x01", 1)[1].split("\x02", 1)[0]
        assert r.props["UNIQ_KEY"] == last
        assert f"{r.topic}#{last}" in m["indexed_keys"]
    # a batch is never split across files; its records are contiguous and share one store time
    fs = man["commitlog_file_size"]
    groups: dict[int, list[Record]] = defaultdict(list)
    for r, m in batches:
        groups[m["batch_id"]].append(r)
    for members in groups.values():
        assert len({r.phy // fs for r in members}) == 1
        assert len({(r.store_ts, r.born_ts, r.topic, r.queue_id) for r in members}) == 1
        assert [r.queue_offset - members[0].queue_offset for r in members] == list(
            range(len(members))
        )
        for a, b in itertools.pairwise(members):
            assert b.phy == a.phy + a.total
    # END_FILE edges: a record leaving exactly 8 bytes fits (then an 8-byte blank follows);
    # one that would leave 7 bytes rolls to the next file
    edges = {m["kind"]: r for r, m in zip(recs, man["records"], strict=True)}
    fit, roll = edges["edge_exact_fit"], edges["edge_roll"]
    assert fs - fit.phy % fs - fit.total == 8
    assert (fit.phy + fit.total, 8) in c.scan.blanks
    assert roll.phy % fs == 0
    assert (roll.phy - (roll.total + 7), roll.total + 7) in c.scan.blanks


def test_broker1g_files_are_sparse(tmp_path_factory: pytest.TempPathFactory) -> None:
    c = get_case("broker1g", tmp_path_factory)
    assert c.man["commitlog_file_size"] == 1 << 30
    assert len(c.man["commitlog_files"]) == 2
    assert len(c.scan.blanks) == 1
    assert any(m["kind"] == "filler" for m in c.man["records"])
    for name in c.man["commitlog_files"]:
        st = os.stat(c.root / "commitlog" / name)
        assert st.st_size == 1 << 30
        assert st.st_blocks * 512 < 64 << 20, f"{name} is not sparse ({st.st_blocks * 512} bytes)"
    for name in c.man["index_files"]:
        st = os.stat(c.root / "index" / name)
        assert st.st_size == 420_000_040
        assert st.st_blocks * 512 < 64 << 20


def test_deterministic_for_a_seed(tmp_path: Path) -> None:
    small: dict[str, Any] = {"cq_units_per_file": 64, "index_slots": 101, "index_entries": 500}
    a = write_broker_store(tmp_path / "a", "full", seed=11, messages=40, **small)
    b = write_broker_store(tmp_path / "b", "full", seed=11, messages=40, **small)
    c = write_broker_store(tmp_path / "c", "full", seed=12, messages=40, **small)
    assert a == b
    assert a["records"] != c["records"]

    def digest(root: Path) -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }

    assert digest(tmp_path / "a") == digest(tmp_path / "b")


def test_cli_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        write_broker_store(tmp_path / "x", "no-such-scenario")
    with pytest.raises(JavaFixtureError, match="default sizes"):
        write_broker_store(tmp_path / "y", "vectors", commitlog_file_size=65536)
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "junk").write_text("x")
    with pytest.raises(JavaFixtureError, match="empty"):
        write_broker_store(tmp_path / "z", "basic")


# --------------------------------------------------------------------------------------
# Spec section 16 vectors
# --------------------------------------------------------------------------------------


VECTOR7 = bytes.fromhex(
    "00 00 00 65 DA A3 20 A7 58 93 2A AC 00 00 00 01"
    "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
    "00 00 00 00 00 00 00 00 00 00 01 8B CF E5 68 00"
    "7F 00 00 01 00 00 9C 40 00 00 01 8B CF E5 68 7B"
    "0A 00 00 01 00 00 2A 9F 00 00 00 00 00 00 00 00"
    "00 00 00 00 00 00 00 02 68 69 01 54 00 07 54 41"
    "47 53 01 41 02"
)


def test_vector_7_full_record_hex(tmp_path_factory: pytest.TempPathFactory) -> None:
    c = get_case("vectors", tmp_path_factory)
    with open(c.root / "commitlog" / "00000000000000000000", "rb") as fh:
        assert fh.read(101) == VECTOR7
    r = c.scan.records[0]
    assert (r.total, r.topic, r.queue_id, r.store_ts) == (101, "T", 1, 1_700_000_000_123)


def test_vector_8_property_order_and_size(tmp_path_factory: pytest.TempPathFactory) -> None:
    c = get_case("vectors", tmp_path_factory)
    r = c.scan.records[1]
    assert r.phy == 101
    assert r.total == 215
    assert r.topic == "TopicTest"
    # the Python model of java.util.HashMap iteration agrees with the spec for both capacities
    inserted = ["UNIQ_KEY", "TAGS", "KEYS", "WAIT", "CLUSTER"]
    assert sorted(inserted, key=lambda k: java_hashmap_bucket(k, 128)) == [
        "UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT",
    ]  # fmt: skip
    assert sorted(inserted, key=lambda k: java_hashmap_bucket(k, 16)) == [
        "KEYS", "UNIQ_KEY", "CLUSTER", "WAIT", "TAGS",
    ]  # fmt: skip
    assert [seg.split("\x01")[0] for seg in r.properties_string.split("\x02")[:-1]] == [
        "UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT",
    ]  # fmt: skip
    assert len(r.properties_string.encode()) == 101
    assert r.msg_id == "0A00000100002A9F0000000000000065"


def test_vector_11_end_file_blank_and_12_cq_entry(tmp_path_factory: pytest.TempPathFactory) -> None:
    c = get_case("vectors", tmp_path_factory)
    with open(c.root / "commitlog" / "00000000000000000000", "rb") as fh:
        fh.seek(1_073_741_724)
        assert fh.read(8) == bytes.fromhex("00000064CBD43194")
    assert c.scan.blanks == [(1_073_741_724, 100)]
    last = c.scan.records[-1]
    assert (last.phy, last.total, last.queue_offset) == (1_073_741_824, 124, 3)
    assert last.msg_id == "0A00000100002A9F0000000040000000"  # vector 10
    cq = (c.root / "consumequeue" / "TopicTest" / "0" / "00000000000000000000").read_bytes()
    blank = bytes(8) + bytes.fromhex("7FFFFFFF") + bytes(8)
    assert cq[:60] == blank * 3
    assert cq[60:80] == bytes.fromhex("0000000040000000 0000007C 000000000027A807")
    assert c.man["queues"]["TopicTest"]["0"] == {
        "min": 3, "max": 4, "prefill": 3, "files": ["00000000000000000000"],
    }  # fmt: skip


def test_vector_14_index_slots(tmp_path_factory: pytest.TempPathFactory) -> None:
    c = get_case("vectors", tmp_path_factory)
    assert java_hash("TopicTest#OrderID001") == -1231272886
    assert java_hash("TopicTest#ogaQmc") == -(1 << 31)
    (name,) = c.man["index_files"]
    with open(c.root / "index" / name, "rb") as fh:
        data = fh.read(40 + 5_000_000 * 4)
        (slot0,) = struct.unpack_from(">i", data, 40)
        (slot_key1,) = struct.unpack_from(">i", data, 40 + 1_969_516 * 4)
        (slot_order,) = struct.unpack_from(">i", data, 5_091_584)
        entries = {}
        for n in (slot0, slot_key1, slot_order):
            fh.seek(20_000_040 + n * 20)
            entries[n] = struct.unpack(">iqii", fh.read(20))
    v14 = c.scan.records[2]
    assert v14.phy == 101 + 215
    assert v14.props == {"KEYS": "ogaQmc KEY1"}
    assert entries[slot0][0] == 0
    assert entries[slot0][1] == v14.phy
    assert entries[slot_key1][0] == index_key_hash("TopicTest#KEY1")
    assert entries[slot_key1][1] == v14.phy
    assert entries[slot_order][0] == 0x4963BBB6
    assert entries[slot_order][1] == 101


def test_vector_13_delay_tags_code(tmp_path_factory: pytest.TempPathFactory) -> None:
    c = get_case("vectors-delay", tmp_path_factory)
    sched3, sched20, redeliv3, redeliv20 = c.scan.records
    assert (sched3.topic, sched3.queue_id, sched3.store_ts) == (
        SCHEDULE_TOPIC,
        2,
        1_700_000_000_000,
    )
    unit = (c.root / "consumequeue" / SCHEDULE_TOPIC / "2" / "00000000000000000000").read_bytes()[
        :20
    ]
    assert struct.unpack(">qiq", unit) == (0, sched3.total, 1_700_000_010_000)
    # level 20 is clamped to 18 (2 h) by the broker's hook: stored as DELAY=18 in queue 17
    assert sched20.props["DELAY"] == "18"
    assert sched20.queue_id == 17
    unit = (c.root / "consumequeue" / SCHEDULE_TOPIC / "17" / "00000000000000000000").read_bytes()[
        :20
    ]
    assert struct.unpack(">qiq", unit)[2] == sched20.store_ts + 7_200_000
    for sched, redelivered in ((sched3, redeliv3), (sched20, redeliv20)):
        assert (redelivered.topic, redelivered.queue_id) == ("TopicTest", 0)
        assert redelivered.properties_string == sched.properties_string
        assert "DELAY\x01" in redelivered.properties_string
        assert "REAL_TOPIC\x01TopicTest\x02" in redelivered.properties_string
        assert "REAL_QID\x010\x02" in redelivered.properties_string
        assert redelivered.store_ts >= sched.store_ts + DELAY_MS[int(sched.props["DELAY"]) - 1]
    cq = (c.root / "consumequeue" / "TopicTest" / "0" / "00000000000000000000").read_bytes()[:40]
    assert struct.unpack_from(">q", cq, 12)[0] == java_hash("TagA") == 2598919


def test_vector_15_index_write(tmp_path_factory: pytest.TempPathFactory) -> None:
    c = get_case("vectors-index", tmp_path_factory)
    (name,) = c.man["index_files"]
    path = c.root / "index" / name
    assert path.stat().st_size == 420_000_040
    with path.open("rb") as fh:
        head = fh.read(20_000_080)  # header, all 5,000,000 slots, entries #0 and #1
    assert head[20_000_060:20_000_080] == bytes.fromhex("4963BBB6") + bytes(16)
    assert head[5_091_584:5_091_588] == b"\x00\x00\x00\x01"
    assert struct.unpack(">qqqqii", head[:40]) == (
        1_700_000_000_123, 1_700_000_000_123, 0, 0, 1, 2,
    )  # fmt: skip
    expected_slots = bytearray(20_000_000)
    expected_slots[5_091_584 - 40 + 3] = 1
    assert head[40:20_000_040] == expected_slots, "exactly one slot is set"
    assert name == "20231114221320123"  # UTC (write_broker_store's default timezone)


# --------------------------------------------------------------------------------------
# The Java store loader against the writer
# --------------------------------------------------------------------------------------


def _manifest_records(man: dict[str, Any]) -> list[tuple[Any, ...]]:
    out = []
    for r in man["records"]:
        body = bytes(r["body_len"]) if r["body_zero_fill"] else base64.b64decode(r["body_b64"])
        out.append(
            (
                r["topic"],
                r["queue_id"],
                r["queue_offset"],
                r["commitlog_offset"],
                r["store_size"],
                hashlib.sha256(body).hexdigest(),
                r["keys"],
                r["uniq_key"],
                r["dispatched"],
                sorted(r["indexed_keys"]),
            )
        )
    return out


def _loaded_records(summary: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (
            r["topic"],
            r["queue_id"],
            r["queue_offset"],
            r["commitlog_offset"],
            r["store_size"],
            r["body_sha256"],
            r["keys"],
            r["uniq_key"],
            r["dispatched"],
            sorted(r["indexed_keys"]),
        )
        for r in summary["records"]
    ]


@pytest.mark.parametrize("name", ["basic", "basic-small-files", "full"])
def test_java_loader_loads_the_writers_stores(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    c = get_case(name, tmp_path_factory)
    man = c.man
    got = load_broker_store(
        c.root, index_slots=man["index_slots"], index_entries=man["index_entries"]
    )
    assert got["problem_count"] == 0, got["problem_details"]
    assert got["abnormal"] == man["abort"]
    assert got["end_offset"] == man["end_offset"]
    assert got["geometry"]["commitlog_file_size"] == man["commitlog_file_size"]
    assert got["geometry"]["cq_file_size"] == man["cq_units_per_file"] * CQ_UNIT
    assert _loaded_records(got) == _manifest_records(man)
    assert got["cq_units"] == sum(1 for r in man["records"] if r["dispatched"])
    assert got["index_files"] == len(man["index_files"])


def test_java_loader_finds_a_damaged_record(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import shutil

    c = get_case("basic", tmp_path_factory)
    root = tmp_path / "store"
    shutil.copytree(c.root, root)
    victim = c.man["records"][100]
    size = c.man["commitlog_file_size"]
    path = root / "commitlog" / f"{victim['commitlog_offset'] // size * size:020d}"
    data = bytearray(path.read_bytes())
    assert victim["body_len"] > 0
    at = victim["commitlog_offset"] % size + 88  # the body's first byte (IPv4 hosts)
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    got = load_broker_store(root)
    # Recovery ends the valid data at the damaged record: the units and index entries of the
    # records after it point past the end.
    assert got["problems"]["crc"] == 1
    assert got["end_offset"] == victim["commitlog_offset"]
    assert got["record_count"] == 100
    assert got["problems"]["cq_dangling"] == 200
    assert got["problems"]["index_dangling"] > 0
