"""``rocketstore bench --scale``: the same figures on stores of growing size.

For each size (GiB of commit log), a store with RocketMQ's default geometry (1 GiB commit log
files, 5 M slots / 20 M entries index files: ``MessageStore(path)``'s defaults) is filled with
1 KiB messages, one key each, by ``put_batch`` of Arrow tables (16,384 rows per call), then
measured (msg/s and whole-process CPU ns per message for each):

- ``put_batch``: the first and the last GiB of the fill;
- ``read_arrow``: 256 Ki messages from the first and from the last GiB;
- ``query_message``: 20,000 random keys of the first and of the last GiB (reads and lookups
  best of three alternated rounds, after a ``flush()`` has written the fill to disk);
- clean open: ``MessageStore(path)`` after ``close()`` (RocketMQ's walk of the last three
  files), then with ``normal_recovery_from_checkpoint=True`` (from the recorded end);
- reopen after ``kill -9``: a child process opens the store, writes 1 s more, pauses 2 s (past
  the checkpoint interval) and is killed; then ``MessageStore(path)`` is timed, with the
  recovery report's ``walked_bytes`` and ``scan_start_file``; and the same with the kill
  landing while the child still writes;
- cleanup: max and p99 ``put`` latency while ``delete_expired_files(force=True)`` deletes
  the expired files, beside the same thread's latencies without cleanup.

The smallest store is the baseline of the others (same run).
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute

import rocketstore

GIB = 1 << 30
BATCH = 16_384
# The step of the sizes (1 GiB) and the store options beyond the defaults (none): a smoke run
# (tests/test_bench_smoke.py) uses MiB steps and small files. The kill -9 child gets them from
# the environment.
_CONF: dict[str, Any] = {"unit": GIB, "batch": BATCH, "options": {}}
_ENV = "ROCKETSTORE_BENCH_SCALE"


def _open(path: str | Path, **kw: Any) -> rocketstore.MessageStore:
    return rocketstore.MessageStore(path, **{**_CONF["options"], **kw})


BODY = 1024
TOPIC = "ScaleTopic"
pc: Any = pyarrow.compute
FILLER = (b"0123456789abcdefghijklmnopqrstuvwxyz" * 40)[: BODY - 12]


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def batch(base: int) -> pa.Table:
    idx = pa.array(range(base, base + _CONF["batch"]), pa.int64())
    digits = pc.utf8_lpad(pc.cast(idx, pa.string()), 11, "0")
    body = pc.cast(pc.binary_join_element_wise(digits, "|", FILLER.decode(), ""), pa.binary())
    return pa.table(
        {
            "topic": pa.array([TOPIC] * _CONF["batch"], pa.string()),
            "body": body,
            "queue_id": pc.cast(pc.bit_wise_and(idx, 7), pa.int32()),
            "keys": pc.binary_join_element_wise("k-", pc.cast(idx, pa.string()), ""),
        }
    )


def fill(store: Any, gib: int, base: int = 0) -> tuple[int, list[tuple[float, float, int]]]:
    """Puts until the commit log holds ``gib`` GiB; per GiB: (seconds, cpu seconds, messages)."""
    per_gib: list[tuple[float, float, int]] = []
    n = base
    t0, c0, n0 = time.perf_counter(), cpu(), n
    while store.max_commitlog_offset() < gib * _CONF["unit"]:
        store.put_batch(batch(n))
        n += _CONF["batch"]
        if store.max_commitlog_offset() >= (len(per_gib) + 1) * _CONF["unit"]:
            per_gib.append((time.perf_counter() - t0, cpu() - c0, n - n0))
            t0, c0, n0 = time.perf_counter(), cpu(), n
    return n, per_gib


def read_rate(store: Any, offset: int, count: int = 262_144) -> tuple[float, float]:
    """(msg/s, CPU ns per message) of ``read_arrow`` of ``count`` messages from ``offset``."""
    done, t0, c0 = 0, time.perf_counter(), cpu()
    while done < count:
        b, offset = store.read_arrow(offset, max_messages=65_536)
        if b.num_rows == 0:
            break
        done += b.num_rows
    return done / (time.perf_counter() - t0), (cpu() - c0) * 1e9 / max(done, 1)


def query_rate(store: Any, lo: int, hi: int, count: int = 20_000) -> tuple[float, float]:
    """(lookups/s, CPU ns per lookup) of ``query_message`` of random keys in ``[lo, hi)``."""
    rng = random.Random(7)
    t0, c0 = time.perf_counter(), cpu()
    for _ in range(count):
        k = rng.randrange(lo, hi)
        if not store.query_message(TOPIC, f"k-{k}", max_num=4):
            raise RuntimeError(f"scale bench: key k-{k} not found")
    return count / (time.perf_counter() - t0), (cpu() - c0) * 1e9 / count


def child(path: str, base: int, pause: bool) -> None:
    store = _open(path)
    t0, n = time.perf_counter(), base
    while time.perf_counter() - t0 < 1.0 or not pause:
        store.put_batch(batch(n))
        n += _CONF["batch"]
        if pause and time.perf_counter() - t0 >= 1.0:
            break
        if not pause and time.perf_counter() - t0 >= 1.0:
            print("WRITING", flush=True)
            t0 = time.perf_counter() + 1e9
    print("READY", flush=True)
    time.sleep(600)


def crash_reopen(path: Path, base: int, pause: bool) -> dict[str, Any]:
    env = dict(os.environ, **{_ENV: json.dumps(_CONF)})
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rocketstore._bench_scale",
            "--child",
            str(path),
            str(base),
            "1" if pause else "0",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as p:
        if p.stdout is None:
            raise RuntimeError("scale bench: no pipe to the child")
        want = "READY" if pause else "WRITING"
        for line in p.stdout:
            if line.strip() == want:
                break
        else:
            raise RuntimeError(f"scale bench: the child exited before {want} ({p.wait()})")
        time.sleep(2.0 if pause else 0.5)
        p.send_signal(signal.SIGKILL)
        p.wait()
    t0 = time.perf_counter()
    store = _open(path)
    dt = time.perf_counter() - t0
    rep = store.recovery_report
    out = {
        "seconds": dt,
        "walked_bytes": rep["walked_bytes"],
        "scan_start_file": rep["scan_start_file"],
        "from_window": rep["from_window"],
        "end": store.max_commitlog_offset(),
    }
    store.close()
    return out


def cleanup_latency(store: Any) -> dict[str, float]:
    def run(seconds: float | None, stop: threading.Event) -> list[float]:
        lat: list[float] = []
        t_end = time.perf_counter() + (seconds or 1e9)
        while not stop.is_set() and time.perf_counter() < t_end:
            t = time.perf_counter()
            store.put(TOPIC, b"x" * BODY, keys="cleanup")
            lat.append(time.perf_counter() - t)
        return lat

    base = run(1.0, threading.Event())
    stop = threading.Event()
    lat: list[float] = []
    th = threading.Thread(target=lambda: lat.extend(run(None, stop)))
    th.start()
    time.sleep(0.2)
    t0 = time.perf_counter()
    rep = store.delete_expired_files(force=True)
    took = time.perf_counter() - t0
    time.sleep(0.2)
    stop.set()
    th.join()
    base.sort()
    lat.sort()
    return {
        "delete_seconds": took,
        "deleted": float(len(rep.get("commitlog_files_deleted", []))),
        "p99_ms": lat[len(lat) * 99 // 100] * 1e3,
        "max_ms": lat[-1] * 1e3,
        "base_p99_ms": base[len(base) * 99 // 100] * 1e3,
        "base_max_ms": base[-1] * 1e3,
    }


def one(size: int, root: Path) -> dict[str, Any]:
    """Every figure of one store of ``size`` GiB under ``root`` (removed afterwards)."""
    path = root / f"store-{size}g"
    shutil.rmtree(path, ignore_errors=True)
    store = _open(path)
    n, per_gib = fill(store, size)
    first, last = per_gib[0], per_gib[-1]
    res: dict[str, Any] = {"gib": size, "messages": n}
    res["put_first"] = (first[2] / first[0], first[1] / first[2] * 1e9)
    res["put_last"] = (last[2] / last[0], last[1] / last[2] * 1e9)
    per = n // size
    # Reads are timed once the fill's dirty pages are on disk: the writeback of the last GiBs
    # (the disk runs at ~0.4 GB/s) would otherwise share the two cores with them.
    t0 = time.perf_counter()
    store.flush()
    res["flush_after_fill"] = time.perf_counter() - t0
    last_off = store.query_message(TOPIC, f"k-{n - per}", max_num=1)[0].commitlog_offset
    rounds: dict[str, list[tuple[float, float]]] = {}
    for _ in range(3):  # alternated, best of three: the flush's writeback of the fill fades
        jobs: list[tuple[str, Callable[[], tuple[float, float]]]] = [
            ("read_first", lambda: read_rate(store, 0)),
            ("read_last", lambda: read_rate(store, last_off)),
            ("query_first", lambda: query_rate(store, 0, per)),
            ("query_last", lambda: query_rate(store, n - per, n)),
        ]
        for k, f in jobs:
            rounds.setdefault(k, []).append(f())
    res.update({k: max(v) for k, v in rounds.items()})  # best msg/s, with its CPU
    store.close()
    for key, kw in [
        ("clean_open", {}),
        ("clean_open_cp", {"normal_recovery_from_checkpoint": True}),
    ]:
        t0 = time.perf_counter()
        store = _open(path, **kw)
        res[key] = time.perf_counter() - t0
        res[key + "_walked"] = store.recovery_report["walked_bytes"]
        store.close()
    res["crash_paused"] = crash_reopen(path, n, True)
    res["crash_writing"] = crash_reopen(path, n + 10_000_000, False)
    store = _open(path)
    res["cleanup"] = cleanup_latency(store)
    store.close()
    shutil.rmtree(path, ignore_errors=True)
    return res


def run_scale(
    sizes: list[int],
    root: Path,
    say: Callable[[str], None] = lambda _m: None,
    *,
    unit: int = GIB,
    options: dict[str, Any] | None = None,
    batch: int = BATCH,
) -> list[dict[str, Any]]:
    """:func:`one` for each size (in ``unit``s: GiB), in order, with ``options`` beyond the
    store's defaults and ``batch`` rows per ``put_batch``."""
    _CONF.update(unit=unit, batch=batch, options=dict(options or {}))
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for s in sizes:
        say(f"[scale] {s} GiB store ...")
        out.append(one(s, root))
    return out


def main() -> None:
    """The kill -9 child (``python -m rocketstore._bench_scale --child PATH BASE PAUSE``)."""
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        _CONF.update(json.loads(os.environ.get(_ENV, "{}")))
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1")
        return
    sys.exit("usage: rocketstore bench --scale (this module is its kill -9 child)")


if __name__ == "__main__":
    main()
