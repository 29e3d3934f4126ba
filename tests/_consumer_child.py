"""Producer and consumer processes for tests/test_consumer.py and the follow benchmark.

``python _consumer_child.py produce ROOT TOPIC FIRST LAST LEDGER [BATCH]``
    puts messages ``FIRST..LAST-1`` (body ``m<i>``, key ``k<i>``, no queue_id: the producer's
    queue choice) in ``put_batch`` calls of BATCH (default 200); after each call returns, appends
    one ``<i> <queue_id> <queue_offset>`` line per message to LEDGER (the acknowledged writes).

``python _consumer_child.py consume ROOT GROUP TOPIC OUT STOPFILE``
    polls as a member of GROUP and appends ``<body>`` lines to OUT (flushed before the next poll,
    which commits them); exits once STOPFILE exists and a poll came back empty.
"""

from __future__ import annotations

import os
import sys

import rocketstore


def produce(root: str, topic: str, first: int, last: int, ledger: str, *, batch: int) -> None:
    with rocketstore.MessageStore(root) as store, open(ledger, "a") as led:
        for start in range(first, last, batch):
            ids = range(start, min(start + batch, last))
            msgs = [{"topic": topic, "body": f"m{i}".encode(), "keys": [f"k{i}"]} for i in ids]
            results = store.put_batch(msgs)
            for r in results:
                assert r.ok, r
            led.write("".join(f"{i} {r.queue_offset}\n" for i, r in zip(ids, results, strict=True)))
            led.flush()


def consume(root: str, group: str, topic: str, out: str, stop: str) -> None:
    with (
        rocketstore.Consumer(
            root,
            group=group,
            topics=[topic],
            auto_commit_interval_ms=200,
            rebalance_interval_ms=200,
        ) as c,
        open(out, "a") as f,
    ):
        print("ready", flush=True)
        while True:
            msgs = c.poll_batch(max_messages=500, timeout=0.2)
            if msgs:
                f.write("".join(m.body.decode() + "\n" for m in msgs))
                f.flush()
            elif os.path.exists(stop):
                return


if __name__ == "__main__":
    if sys.argv[1] == "produce":
        a = sys.argv[2:]
        produce(a[0], a[1], int(a[2]), int(a[3]), a[4], batch=int(a[5]) if len(a) > 5 else 200)
    else:
        consume(*sys.argv[2:7])
