"""``rocketstore bench --peers``: rocketstore beside what a Python user picks instead.

The same messages (``_bench.bench_table``: a body, a tag and a unique key ``k-{i}`` each) go
into each system in batches of ``--batch`` rows (16,384), nothing fsynced per batch, then:

* ``append``: every batch written (rocketstore: ``put_batch`` of the Arrow slice, until the
  consume queues and index have caught up; the peers: their own batch write);
* ``read``: every message read back in order, bodies summed (rocketstore: ``get_message_arrow``
  over each queue; the peers: a cursor or scan in write order);
* ``lookup``: ``--lookups`` random keys (100,000), in calls of 256 keys where the system has a
  batched form (rocketstore ``query_messages``, SQLite ``IN``, a dataset filter ``isin``), a
  body returned for each; time-boxed for the systems that scan (Delta Lake, Parquet);
* ``disk``: the blocks the closed store uses (``st_blocks``, what ``du`` counts).

The systems, each with the options a user would set for a message log:

=============  ================================================================================
rocketstore    ``MessageStore(path)`` with its defaults
LMDB           ``lmdb``: ``sync=False``; ``seq -> body`` (``putmulti(append=True)``) and
               ``key -> seq`` tables, one write transaction per batch
RocksDB        ``rocksdict``: ``m<seq> -> body`` and ``k<key> -> seq`` in one ``WriteBatch`` per
               batch (WAL on, not synced)
SQLite         WAL, ``synchronous=NORMAL``, ``(seq INTEGER PRIMARY KEY, key, body)`` with an
               index on ``key``; ``executemany`` per batch in one transaction
Delta Lake     ``deltalake.write_deltalake(mode="append")`` per batch (columns seq, key, body)
Parquet        one ``pyarrow.parquet`` file per batch (columns seq, key, body)
=============  ================================================================================

The peers get their rows as Python ``bytes`` (or an Arrow table) prepared before the clock
starts; rocketstore gets the Arrow slices. CPU is ``time.process_time()``: every thread of
this process (RocksDB's compactions, rocketstore's dispatch and flush threads) over the timed
span. A system whose package is missing is reported as skipped with the ``pip install`` line
(``pip install 'rocketstore[bench]'`` installs them all).
"""

from __future__ import annotations

import inspect
import os
import random
import shutil
import sqlite3
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from rocketstore._bench_common import QUEUES, TOPICS, Figure, wait_dispatched

__all__ = ["PEERS", "disk_bytes", "fig_name", "run_peers", "supports_columns"]

# Keys per batched lookup call.
KEY_BATCH = 256

# (figure prefix, display name, module to import, pip name)
PEERS: list[tuple[str, str, str | None, str | None]] = [
    ("rocketstore", "rocketstore", None, None),
    ("lmdb", "LMDB", "lmdb", "lmdb"),
    ("rocksdb", "RocksDB", "rocksdict", "rocksdict"),
    ("sqlite", "SQLite", None, None),
    ("delta", "Delta Lake", "deltalake", "deltalake"),
    ("parquet", "Parquet", "pyarrow.parquet", "pyarrow"),
]

OPS = ("append", "read", "lookup", "disk")


def disk_bytes(path: Path) -> int:
    """Bytes of the blocks every file under ``path`` holds (``st_blocks * 512``, as ``du``)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def supports_columns(method: Callable[..., Any]) -> bool:
    """Whether an Arrow read method takes ``columns=`` (a projection)."""
    try:
        return "columns" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


class _Data:
    """One size's messages in the forms the systems take (built before any clock starts)."""

    def __init__(self, table: Any, size: int, batch: int, lookups: int) -> None:
        import pyarrow as pa

        self.size = size
        self.n = table.num_rows
        self.table = table
        self.slices = [table.slice(i, batch) for i in range(0, self.n, batch)]
        self.keys: list[bytes] = [k.encode() for k in table.column("keys").to_pylist()]
        self.bodies: list[bytes] = table.column("body").to_pylist()
        self.topics: list[str] = [f"BenchTopic{i % TOPICS}" for i in range(self.n)]
        self.seq = [struct.pack(">Q", i) for i in range(self.n)]
        # seq, key, body: what the columnar peers store.
        seq_col = pa.array(range(self.n), pa.int64())
        self.plain = pa.table(
            {"seq": seq_col, "key": table.column("keys").cast(pa.string()), "body": table["body"]}
        )
        self.plain_slices = [self.plain.slice(i, batch) for i in range(0, self.n, batch)]
        self.batch = batch
        rng = random.Random(11)
        self.lookup_ids = rng.sample(range(self.n), min(lookups, self.n))  # distinct keys

    def ranges(self) -> Iterator[tuple[int, int]]:
        for i in range(0, self.n, self.batch):
            yield i, min(self.n, i + self.batch)

    def lookup_batches(self) -> list[list[int]]:
        ids = self.lookup_ids
        return [ids[j : j + KEY_BATCH] for j in range(0, len(ids), KEY_BATCH)]


@contextmanager
def _clock(fig: Figure) -> Iterator[Figure]:
    c0, t0 = time.process_time(), time.perf_counter()
    yield fig
    fig.seconds = time.perf_counter() - t0
    fig.cpu_seconds = time.process_time() - c0


def fig_name(system: str, op: str) -> str:
    """The figure name of one system's operation (``peers_lmdb_read``)."""
    return f"peers_{system}_{op}"


def _fig(system: str, op: str, size: int) -> Figure:
    f = Figure(fig_name(system, op), size)
    f.extra["system"] = system
    f.extra["op"] = op
    return f


def _disk(fig: Figure, path: Path, d: _Data) -> None:
    fig.extra["bytes"] = disk_bytes(path)
    fig.messages = d.n
    fig.note = f"{fig.extra['bytes'] / 1e6:,.1f} MB on disk (st_blocks) after close"


def _lookup(
    system: str,
    d: _Data,
    seconds: float,
    one_call: Callable[[list[int]], int],
) -> Figure:
    """Runs ``one_call`` (keys by row number -> bodies found) over the lookup batches,
    time-boxed by ``seconds``."""
    fig = _fig(system, "lookup", d.size)
    found = done = 0
    with _clock(fig):
        deadline = time.perf_counter() + seconds
        for ids in d.lookup_batches():
            found += one_call(ids)
            done += len(ids)
            if time.perf_counter() > deadline:
                break
    fig.messages = done
    fig.body_bytes = found * d.size
    fig.extra["batch"] = KEY_BATCH
    if done < len(d.lookup_ids):
        fig.note = f"time-boxed: {done:,} of {len(d.lookup_ids):,} keys"
    if found != done:
        fig.note = (fig.note + "; " if fig.note else "") + f"{done - found} keys not found"
    return fig


# --------------------------------------------------------------------------------------
# the systems
# --------------------------------------------------------------------------------------


def _rocketstore(path: Path, d: _Data, seconds: float) -> list[Figure]:
    import rocketstore

    figs: list[Figure] = []
    store = rocketstore.MessageStore(path)
    try:
        fig = _fig("rocketstore", "append", d.size)
        with _clock(fig):
            for part in d.slices:
                store.put_batch(part)
            wait_dispatched(store)
        fig.messages, fig.body_bytes = d.n, d.n * d.size
        fig.note = "put_batch of Arrow slices, until dispatched (defaults)"
        figs.append(fig)

        def read_all(**kw: Any) -> tuple[int, int]:
            got = nbytes = 0
            for t in range(TOPICS):
                for q in range(QUEUES):
                    off = 0
                    while True:
                        batch, off = store.get_message_arrow(f"BenchTopic{t}", q, off, 65_536, **kw)
                        if batch.num_rows == 0:
                            break
                        got += batch.num_rows
                        buf = batch.column("body").buffers()[2]
                        nbytes += buf.size if buf is not None else 0
            return got, nbytes

        fig = _fig("rocketstore", "read", d.size)
        with _clock(fig):
            fig.messages, fig.body_bytes = read_all()
        fig.note = "get_message_arrow over each queue, every column"
        figs.append(fig)
        fig = _fig("rocketstore", "read_body", d.size)
        if supports_columns(store.get_message_arrow):
            with _clock(fig):
                fig.messages, fig.body_bytes = read_all(columns=["body"])
            fig.note = 'get_message_arrow(columns=["body"])'
        else:
            fig.skipped = "get_message_arrow has no columns= in this build"
        figs.append(fig)

        # query_messages asks one topic per call: each batch's keys grouped by topic.
        by_topic: dict[int, list[str]] = {}

        def one_call(ids: list[int]) -> int:
            by_topic.clear()
            for i in ids:
                by_topic.setdefault(i % TOPICS, []).append(f"k-{i}")
            found = 0
            for t, keys in by_topic.items():
                for msgs in store.query_messages(f"BenchTopic{t}", keys, max_num=1):
                    found += bool(msgs) and len(msgs[0].body) > 0
            return found

        fig = _lookup("rocketstore", d, seconds, one_call)
        fig.note = (fig.note + "; " if fig.note else "") + "query_messages, 256 keys a call"
        figs.append(fig)
    finally:
        store.close()
    fig = _fig("rocketstore", "disk", d.size)
    _disk(fig, path, d)
    figs.append(fig)
    return figs


def _lmdb(path: Path, d: _Data, seconds: float) -> list[Figure]:
    import lmdb

    figs: list[Figure] = []
    env = lmdb.open(
        str(path),
        map_size=max(1 << 30, 4 * d.n * (d.size + 64)),
        sync=False,
        metasync=False,
        max_dbs=2,
    )
    try:
        msgs = env.open_db(b"msgs")
        keys = env.open_db(b"keys")
        fig = _fig("lmdb", "append", d.size)
        with _clock(fig):
            for a, b in d.ranges():
                with env.begin(write=True) as txn:
                    txn.cursor(msgs).putmulti(
                        zip(d.seq[a:b], d.bodies[a:b], strict=True), append=True
                    )
                    txn.cursor(keys).putmulti(zip(d.keys[a:b], d.seq[a:b], strict=True))
        fig.messages, fig.body_bytes = d.n, d.n * d.size
        fig.note = "sync=False; putmulti per batch into seq -> body and key -> seq"
        figs.append(fig)

        fig = _fig("lmdb", "read", d.size)
        got = nbytes = 0
        with _clock(fig), env.begin() as txn:
            for v in txn.cursor(msgs).iternext(keys=False, values=True):
                nbytes += len(v)
                got += 1
        fig.messages, fig.body_bytes = got, nbytes
        fig.note = "cursor over seq -> body, values only"
        figs.append(fig)

        def one_call(ids: list[int]) -> int:
            found = 0
            with env.begin() as txn:
                for i in ids:
                    s = txn.get(d.keys[i], db=keys)
                    if s is not None:
                        body = txn.get(s, db=msgs)
                        found += body is not None
            return found

        fig = _lookup("lmdb", d, seconds, one_call)
        fig.note = (fig.note + "; " if fig.note else "") + "get key -> seq -> body"
        figs.append(fig)
    finally:
        env.close()
    fig = _fig("lmdb", "disk", d.size)
    _disk(fig, path, d)
    figs.append(fig)
    return figs


def _rocksdb(path: Path, d: _Data, seconds: float) -> list[Figure]:
    from rocksdict import Options, Rdict, WriteBatch

    figs: list[Figure] = []
    db = Rdict(str(path), Options(raw_mode=True))
    try:
        mkeys = [b"m" + s for s in d.seq]
        kkeys = [b"k" + k for k in d.keys]
        fig = _fig("rocksdb", "append", d.size)
        with _clock(fig):
            for a, b in d.ranges():
                wb = WriteBatch(raw_mode=True)
                for i in range(a, b):
                    wb.put(mkeys[i], d.bodies[i])
                    wb.put(kkeys[i], mkeys[i])
                db.write(wb)
        fig.messages, fig.body_bytes = d.n, d.n * d.size
        fig.note = "one WriteBatch per batch (WAL on, not synced)"
        figs.append(fig)

        fig = _fig("rocksdb", "read", d.size)
        got = nbytes = 0
        with _clock(fig):
            for v in db.values(from_key=b"m"):
                nbytes += len(v)
                got += 1
        fig.messages, fig.body_bytes = got, nbytes
        fig.note = "values() from the first m<seq> key"
        figs.append(fig)

        def one_call(ids: list[int]) -> int:
            get: Any = db.get  # a list of keys: a multi-get, a list of values or None
            seqs: list[bytes | None] = get([kkeys[i] for i in ids])
            bodies: list[bytes | None] = get([s for s in seqs if s is not None])
            return sum(b is not None for b in bodies)

        fig = _lookup("rocksdb", d, seconds, one_call)
        fig.note = (fig.note + "; " if fig.note else "") + "multi-get key -> seq -> body"
        figs.append(fig)
    finally:
        db.close()
    fig = _fig("rocksdb", "disk", d.size)
    _disk(fig, path, d)
    figs.append(fig)
    return figs


def _sqlite(path: Path, d: _Data, seconds: float) -> list[Figure]:
    figs: list[Figure] = []
    path.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path / "log.db", isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE log (seq INTEGER PRIMARY KEY, key TEXT, body BLOB)")
        db.execute("CREATE INDEX log_key ON log (key)")
        keys = [k.decode() for k in d.keys]
        rows = list(zip(range(d.n), keys, d.bodies, strict=True))
        fig = _fig("sqlite", "append", d.size)
        with _clock(fig):
            for a, b in d.ranges():
                db.execute("BEGIN")
                db.executemany("INSERT INTO log VALUES (?, ?, ?)", rows[a:b])
                db.execute("COMMIT")
        fig.messages, fig.body_bytes = d.n, d.n * d.size
        fig.note = "WAL, synchronous=NORMAL, index on key; executemany per batch"
        figs.append(fig)
        del rows

        fig = _fig("sqlite", "read", d.size)
        got = nbytes = 0
        with _clock(fig):
            cur = db.execute("SELECT body FROM log ORDER BY seq")
            while True:
                part = cur.fetchmany(d.batch)
                if not part:
                    break
                got += len(part)
                for (body,) in part:
                    nbytes += len(body)
        fig.messages, fig.body_bytes = got, nbytes
        fig.note = "SELECT body ORDER BY seq"
        figs.append(fig)

        def one_call(ids: list[int]) -> int:
            sql = f"SELECT body FROM log WHERE key IN ({','.join('?' * len(ids))})"
            return len(db.execute(sql, [keys[i] for i in ids]).fetchall())

        fig = _lookup("sqlite", d, seconds, one_call)
        fig.note = (fig.note + "; " if fig.note else "") + "WHERE key IN (256 keys)"
        figs.append(fig)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    fig = _fig("sqlite", "disk", d.size)
    _disk(fig, path, d)
    figs.append(fig)
    return figs


def _dataset_figs(
    system: str, d: _Data, seconds: float, dataset: Callable[[], Any]
) -> list[Figure]:
    """Read and lookup figures of a columnar peer, through a ``pyarrow.dataset``."""
    import pyarrow.dataset as ds

    figs: list[Figure] = []
    # Opened once, as the key-value stores are: the file listing (Parquet) or the log replay
    # (Delta Lake) is not timed, the scans of it are.
    dset = dataset()
    fig = _fig(system, "read", d.size)
    got = nbytes = 0
    with _clock(fig):
        for batch in dset.to_batches(columns=["seq", "key", "body"]):
            got += batch.num_rows
            buf = batch.column(2).buffers()[2]
            nbytes += buf.size if buf is not None else 0
    fig.messages, fig.body_bytes = got, nbytes
    fig.note = "every file's batches (seq, key, body)"
    figs.append(fig)

    keys = [k.decode() for k in d.keys]

    def one_call(ids: list[int]) -> int:
        want = [keys[i] for i in ids]
        t = dset.to_table(columns=["body"], filter=ds.field("key").isin(want))
        return int(t.num_rows)

    fig = _lookup(system, d, seconds, one_call)
    fig.note = (fig.note + "; " if fig.note else "") + "filter key isin(256 keys)"
    figs.append(fig)
    return figs


def _delta(path: Path, d: _Data, seconds: float) -> list[Figure]:
    from deltalake import DeltaTable, write_deltalake

    figs: list[Figure] = []
    fig = _fig("delta", "append", d.size)
    with _clock(fig):
        for part in d.plain_slices:
            write_deltalake(str(path), part, mode="append")
    fig.messages, fig.body_bytes = d.n, d.n * d.size
    fig.note = "write_deltalake(mode='append') per batch"
    figs.append(fig)
    table = DeltaTable(str(path))
    figs.extend(_dataset_figs("delta", d, seconds, table.to_pyarrow_dataset))
    fig = _fig("delta", "disk", d.size)
    _disk(fig, path, d)
    figs.append(fig)
    return figs


def _parquet(path: Path, d: _Data, seconds: float) -> list[Figure]:
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    figs: list[Figure] = []
    path.mkdir(parents=True, exist_ok=True)
    fig = _fig("parquet", "append", d.size)
    with _clock(fig):
        for i, part in enumerate(d.plain_slices):
            pq.write_table(part, path / f"part-{i:06d}.parquet")
    fig.messages, fig.body_bytes = d.n, d.n * d.size
    fig.note = "pyarrow.parquet.write_table, one file per batch (snappy)"
    figs.append(fig)
    figs.extend(
        _dataset_figs("parquet", d, seconds, lambda: ds.dataset(str(path), format="parquet"))
    )
    fig = _fig("parquet", "disk", d.size)
    _disk(fig, path, d)
    figs.append(fig)
    return figs


_RUNNERS: dict[str, Callable[[Path, _Data, float], list[Figure]]] = {
    "rocketstore": _rocketstore,
    "lmdb": _lmdb,
    "rocksdb": _rocksdb,
    "sqlite": _sqlite,
    "delta": _delta,
    "parquet": _parquet,
}


def _importable(module: str | None) -> str | None:
    """None if ``module`` imports, else the reason."""
    if module is None:
        return None
    try:
        __import__(module)
    except ImportError as e:
        return str(e)
    return None


def run_peers(
    base: Path,
    table: Any,
    size: int,
    *,
    batch: int = 16_384,
    lookups: int = 100_000,
    seconds: float = 5.0,
    say: Callable[[str], None] = lambda _m: None,
) -> list[Figure]:
    """Every system's figures on ``table`` (a ``bench_table``) with ``size``-byte bodies.

    Each system writes under ``base`` and its files are removed after its disk figure.
    """
    d = _Data(table, size, batch, lookups)
    figs: list[Figure] = []
    for system, label, module, pip_name in PEERS:
        missing = _importable(module)
        if missing is not None:
            for op in OPS:
                f = _fig(system, op, size)
                f.skipped = f"{label}: {missing} (pip install 'rocketstore[bench]' or {pip_name})"
                figs.append(f)
            continue
        say(f"[{size} B] peers: {label} ...")
        path = base / f"peer-{system}-{size}"
        shutil.rmtree(path, ignore_errors=True)
        try:
            figs.extend(_RUNNERS[system](path, d, seconds))
        finally:
            shutil.rmtree(path, ignore_errors=True)
    return figs
