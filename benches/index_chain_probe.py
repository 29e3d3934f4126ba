"""Key lookups against the number of keys in an index file (RocketMQ's default geometry).

An index file has a fixed number of hash slots (``max_hash_slot_num``, 5,000,000); each slot
holds the newest entry of a chain that runs from newer to older entries (spec §6). A lookup
walks its slot's whole chain (it collects up to ``max_num`` matches, so it cannot stop at the
first), each entry a dependent load from a random place in the file: about
``1 + keys / slots`` entries, 1.18 with 900,000 keys and 2.43 with 7,160,000.
``benches/scale.py`` shows ``query_message`` slower on an 8 GiB store than on a 1 GiB one;
this probe separates the index from the store's size: two stores of 100 B messages (so the
commit log stays small), 900,000 and 7,160,000 keys (the 1 and 8 GiB stores of ``scale.py``),
each queried for its oldest and its newest 900,000 keys.

For each: lookups/s and process CPU ns per lookup (best of three alternated rounds of 100,000
random keys), and the expected number of entries a lookup walks::

    .venv/bin/python benches/index_chain_probe.py [--dir /tmp] [--more-slots]

``--more-slots`` adds the 7,160,000 keys in an index file of four times the slots
(``max_hash_slot_num=20000000``): chains as short as with 1,800,000 keys in the default file.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import rocketstore

SLOTS = 5_000_000
TOPIC = "ChainTopic"
WINDOW = 900_000
CALL = 16_384
BODY = b"x" * 100


def batch(base: int, n: int) -> pa.Table:
    idx = pa.array(range(base, base + n), pa.int64())
    return pa.table(
        {
            "topic": pa.array([TOPIC] * n, pa.string()),
            "body": pa.array([BODY] * n, pa.binary()),
            "queue_id": pc.cast(pc.bit_wise_and(idx, 7), pa.int32()),
            "keys": pc.binary_join_element_wise("k-", pc.cast(idx, pa.string()), ""),
        }
    )


def lookups(
    store: rocketstore.MessageStore, lo: int, hi: int, count: int = 100_000
) -> tuple[float, float]:
    rng = random.Random(11)
    keys = [f"k-{rng.randrange(lo, hi)}" for _ in range(count)]
    t0, c0 = time.perf_counter(), time.process_time()
    for k in keys:
        assert store.query_message(TOPIC, k, max_num=4), k
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return count / wall, cpu / count * 1e9


def one(root: Path, n: int, slots: int) -> dict[str, tuple[float, float]]:
    path = root / f"chain-{n}"
    shutil.rmtree(path, ignore_errors=True)
    out: dict[str, tuple[float, float]] = {}
    with rocketstore.MessageStore(path, max_hash_slot_num=slots) as store:
        for base in range(0, n, CALL):
            store.put_batch(batch(base, min(CALL, n - base)))
        store.flush()
        while store.stats()["dispatch_behind_bytes"] > 0:
            time.sleep(0.01)
        for _ in range(3):
            for name, lo, hi in [("oldest", 0, WINDOW), ("newest", n - WINDOW, n)]:
                r = lookups(store, lo, hi)
                if name not in out or r[0] > out[name][0]:
                    out[name] = r
    shutil.rmtree(path, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument(
        "--more-slots",
        action="store_true",
        help=f"also 7,160,000 keys in a file of {4 * SLOTS:,} slots (max_hash_slot_num)",
    )
    a = ap.parse_args()
    root = Path(a.dir)
    root.mkdir(parents=True, exist_ok=True)
    print(
        "| keys in the index | slots | keys queried | chain entries | lookups/s | CPU ns/lookup |"
    )
    print("|---|---|---|---|---|---|")
    runs = [(WINDOW, SLOTS), (7_160_000, SLOTS)] + (
        [(7_160_000, 4 * SLOTS)] if a.more_slots else []
    )
    for n, slots in runs:
        res = one(root, n, slots)
        chain = 1 + (n - 1) / slots
        for name in ("oldest", "newest"):
            rate, cpu = res[name]
            print(
                f"| {n:,} | {slots:,} | {name} {WINDOW:,} | {chain:.2f} | {rate / 1e3:.0f} k "
                f"| {cpu:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
