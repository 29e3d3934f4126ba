"""Read-path probe: one read figure on a prepared store, msg/s and process CPU ns per message.

Run it alternately with two interpreters (two builds of rocketstore) on the same store to
compare them on a busy machine, where only the CPU time per message stays comparable:

    python benches/read_probe.py 100 prep            # once: 300,000 x 100 B messages
    for w in get_message read_arrow get_message_arrow query; do
        .venv/bin/python benches/read_probe.py 100 $w 2
        /other/.venv/bin/python benches/read_probe.py 100 $w 2
    done

Figures: ``get_message`` (32 per call, every queue, each body's length read), ``read_arrow``
(65,536 per call), ``get_message_arrow`` (every queue), ``query`` (100,000 random keys per
pass), ``query_batch`` (the same keys, 256 per ``query_messages`` call);
two baselines on the same store: ``arrow_take`` (each queue's rows gathered by pyarrow's ``take``
from the whole log already read into one table: the same columns copied by Arrow itself, no record
decoding) and ``file_read`` (``readinto()`` of the commit log files up to the last record: the scan
floor of ``rocketstore bench``). CPU is ``time.process_time()``: every thread of the process;
"cores busy" is that CPU over the wall time (how well a read's helper threads run beside the
calling thread). pyarrow is imported before the clock starts (the first Arrow read would otherwise
import it, ~0.16 s of CPU, inside the timed loop).
"""

import os
import random
import shutil
import sys
import tempfile
import time

import pyarrow  # noqa: F401  (imported here, not by the first read inside the timed loop)

import rocketstore

# Messages of a prepared store: 300,000, or READ_PROBE_MESSAGES (the bench's shape is 1,000,000
# at 100 B and 250,000 at 1 KiB); prepare and read with the same value.
N = int(os.environ.get("READ_PROBE_MESSAGES", "300000"))
CONFIG = {
    "mapped_file_size_commit_log": 256 << 20,
    "mapped_file_size_consume_queue": 65536 * 20,
    "max_hash_slot_num": 1_000_000,
    "max_index_num": 4_000_000,
}


def main() -> None:
    size, what = int(sys.argv[1]), sys.argv[2]
    passes = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    path = os.path.join(tempfile.gettempdir(), f"rocketstore-read-probe-{size}-{N}")
    if what == "prep":
        from rocketstore._bench import bench_table

        table = bench_table(N, size)
        shutil.rmtree(path, ignore_errors=True)
        with rocketstore.MessageStore(path, **CONFIG) as s:
            for i in range(0, N, 16384):
                s.put_batch(table.slice(i, 16384))
            while s.stats().get("dispatch_behind_bytes", 0) > 0:
                time.sleep(0.01)
        return
    s = rocketstore.MessageStore(path, read_only=True, **CONFIG)
    got = 0
    if what == "arrow_take":
        # The same rows gathered by Arrow itself: the whole log read into one table (untimed),
        # then each queue's rows taken from it (the columns get_message_arrow builds, copied
        # by pyarrow's `take` from memory instead of decoded from the mapped records).
        import pyarrow as pa
        import pyarrow.compute as pc

        batches, off = [], 0
        while True:
            batch, off = s.read_arrow(off, max_messages=65536)
            if batch.num_rows == 0:
                break
            batches.append(batch)
        table = pa.Table.from_batches(batches).combine_chunks()
        rows = pa.array(range(table.num_rows), pa.int64())
        topic, queue = table["topic"], table["queue_id"]
        queues = [
            pc.filter(rows, pc.and_(pc.equal(topic, f"BenchTopic{t}"), pc.equal(queue, q)))
            for t in range(4)
            for q in range(8)
        ]
    elif what == "file_read":
        log = os.path.join(path, "commitlog")
        files = sorted(os.path.join(log, f) for f in os.listdir(log))
        buf = memoryview(bytearray(8 << 20))
    elif what == "query_batch":
        # The same 100,000 random keys as `query`, 256 of one topic per call (formatted
        # before the clock starts).
        rng = random.Random(5)
        ids = [rng.randrange(N) for _ in range(100_000)]
        calls = [
            (f"BenchTopic{t}", keys[j : j + 256])
            for t in range(4)
            for keys in [[f"k-{i}" for i in ids if i % 4 == t]]
            for j in range(0, len(keys), 256)
        ]
        rng.shuffle(calls)
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(passes):
        if what == "read_arrow":
            off = 0
            while True:
                batch, off = s.read_arrow(off, max_messages=65536)
                if batch.num_rows == 0:
                    break
                got += batch.num_rows
        elif what in ("get_message", "get_message_arrow"):
            for t in range(4):
                for q in range(8):
                    off = 0
                    while True:
                        if what == "get_message":
                            r = s.get_message(f"BenchTopic{t}", q, off, 32)
                            msgs = r.messages
                            if not msgs:
                                break
                            for m in msgs:
                                len(m.body)
                            got += len(msgs)
                            off = r.next_begin_offset
                        else:
                            batch, off = s.get_message_arrow(f"BenchTopic{t}", q, off, 65536)
                            if batch.num_rows == 0:
                                break
                            got += batch.num_rows
        elif what == "arrow_take":
            for idx in queues:
                got += table.take(idx).num_rows
        elif what == "file_read":
            # The scan floor of `rocketstore bench` (readinto() of every commit log file, page
            # cache warm), counted in the store's messages.
            left = s.max_commitlog_offset()  # the records, not the files' zeroed tails
            for f in files:
                with open(f, "rb", buffering=0) as fh:
                    while left > 0 and (n := fh.readinto(buf[: min(len(buf), left)])):
                        left -= n
            got += N
        elif what == "query":
            rng = random.Random(5)
            for _ in range(100_000):
                i = rng.randrange(N)
                got += len(s.query_message(f"BenchTopic{i % 4}", f"k-{i}", max_num=4))
        elif what == "query_batch":
            for topic, keys in calls:
                got += sum(map(len, s.query_messages(topic, keys, max_num=4)))
        else:
            sys.exit(f"unknown figure {what!r}")
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    print(
        f"{what} {size} B: {got} msgs, {got / wall / 1e6:.2f} M msg/s, "
        f"{cpu * 1e9 / max(got, 1):.0f} ns CPU per message, {cpu / wall:.2f} cores busy"
    )
    s.close()


if __name__ == "__main__":
    main()
