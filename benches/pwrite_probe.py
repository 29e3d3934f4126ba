"""`pwrite_commit_log` off against on, alternated: the bench's rows that it moves.

For each round, a fresh store per mode with `rocketstore bench`'s shape and options, filled
with `put_batch` (the bench's `_put_batch`: CPU of the whole window until dispatched), then
read back with `get_message`, `get_message_arrow` and `query_message` (minor page faults per
message beside the CPU: records written with `pwrite` are mapped into the reader on first
touch); with
`--put`, the one-call-per-message `put` row instead.

    .venv/bin/python benches/pwrite_probe.py 100 4
    .venv/bin/python benches/pwrite_probe.py 100 4 --put
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
from pathlib import Path
from typing import Any

import rocketstore
from rocketstore import _bench as b


def _minflt() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("size", type=int)
    ap.add_argument("rounds", type=int)
    ap.add_argument("--put", action="store_true", help="the put row instead of put_batch")
    ap.add_argument("--dir", default=None, help="parent of the stores (default: $TMPDIR)")
    args = ap.parse_args()
    opts = b.BenchOptions(sizes=[args.size])
    n = 300_000 if args.put else opts.messages_for(args.size)
    table = b.bench_table(n, args.size)
    batches = [table.slice(i, opts.batch) for i in range(0, n, opts.batch)]
    base = Path(tempfile.mkdtemp(prefix="rs-pwrite-probe-", dir=args.dir))
    try:
        for r in range(args.rounds):
            for pw in (False, True) if r % 2 == 0 else (True, False):

                def _open(path: Path, o: b.BenchOptions, pw: bool = pw) -> Any:
                    return rocketstore.MessageStore(
                        path,
                        mapped_file_size_commit_log=o.file_size,
                        mapped_file_size_consume_queue=65_536 * 20,
                        max_hash_slot_num=1_000_000,
                        max_index_num=4_000_000,
                        pwrite_commit_log=pw,
                    )

                b._open = _open  # type: ignore[assignment]
                data = b._Data(
                    size=args.size,
                    table=table,
                    n=n,
                    body_bytes=n * args.size,
                    batches=batches,
                    batch_body_bytes=[x.num_rows * args.size for x in batches],
                )
                d = base / f"{r}-{int(pw)}"
                if args.put:
                    fig = b._put_each(d, data, opts)
                    print(
                        f"{args.size} B pwrite={pw}: put {fig.msgs_per_s / 1e3:.0f} k/s, "
                        f"{fig.cpu_ns_per_msg:.0f} CPU ns/msg",
                        flush=True,
                    )
                else:
                    fig, store = b._put_batch(d, data, opts)
                    b._wait_background_idle(30.0)  # as `rocketstore bench` does
                    f0 = _minflt()
                    g = b._get_message(store, data, opts)
                    f1 = _minflt()
                    ga = b._get_message_arrow(store, data, opts)
                    f2 = _minflt()
                    q = b._query(store, data, opts)
                    f3 = _minflt()
                    store.close()
                    print(
                        f"{args.size} B pwrite={pw}: put_batch {fig.msgs_per_s / 1e6:.2f} M/s "
                        f"{fig.cpu_ns_per_msg:.0f} ns | get_message {g.msgs_per_s / 1e6:.2f} M/s "
                        f"{g.cpu_ns_per_msg:.0f} ns, {(f1 - f0) / max(g.messages, 1):.3f} "
                        f"minflt/msg | get_message_arrow {ga.msgs_per_s / 1e6:.2f} M/s "
                        f"{ga.cpu_ns_per_msg:.0f} ns, {(f2 - f1) / max(ga.messages, 1):.3f} "
                        f"minflt/msg | query_message {q.msgs_per_s / 1e3:.0f} k/s "
                        f"{q.cpu_ns_per_msg:.0f} ns, "
                        f"{(f3 - f2) / max(q.messages, 1):.3f} minflt/msg",
                        flush=True,
                    )
                shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
