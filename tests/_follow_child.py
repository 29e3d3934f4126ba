"""A writer process for tests/test_follow.py and tests/test_consumer.py.

``python _follow_child.py ROOT [key=value ...]`` opens ``ROOT`` writable (``key=value`` are
store settings) and answers one line per command on stdin:

* ``ping`` -> ``pong``
* ``put TOPIC QID N [SIZE]`` -> the queue offsets put (bodies ``TOPIC-QID-OFFSET`` padded to
  SIZE, keys ``k-TOPIC-QID-OFFSET``); ``QID`` -1: no queue_id (the producer's queue choice)
* ``flush`` -> ``ok``; ``clean`` -> deletes expired files (forced) -> ``ok``
* ``close`` -> closes the store -> ``ok``, then exits
"""

from __future__ import annotations

import sys

import rocketstore


def main() -> None:
    root = sys.argv[1]
    config: dict[str, object] = {}
    for kv in sys.argv[2:]:
        k, v = kv.split("=", 1)
        config[k] = int(v) if v.lstrip("-").isdigit() else v
    store = rocketstore.MessageStore(root, **config)  # type: ignore[arg-type]
    counters: dict[tuple[str, int], int] = {}
    for line in sys.stdin:
        cmd = line.split()
        try:
            if not cmd:
                continue
            if cmd[0] == "ping":
                out = "pong"
            elif cmd[0] == "put":
                topic, qid, n = cmd[1], int(cmd[2]), int(cmd[3])
                size = int(cmd[4]) if len(cmd) > 4 else 16
                offsets = []
                for _ in range(n):
                    q = None if qid < 0 else qid
                    if (topic, qid) not in counters:
                        # Exact at open (recovery dispatches everything); counted from then on.
                        counters[topic, qid] = store.max_offset_in_queue(topic, max(qid, 0))
                    nxt = counters[topic, qid]
                    counters[topic, qid] = nxt + 1
                    body = f"{topic}-{qid}-{nxt}".encode().ljust(size, b".")
                    r = store.put(topic, body, queue_id=q, keys=[f"k-{topic}-{qid}-{nxt}"])
                    offsets.append(r.queue_offset)
                out = " ".join(map(str, offsets))
            elif cmd[0] == "flush":
                store.flush()
                out = "ok"
            elif cmd[0] == "clean":
                store.flush()
                store.delete_expired_files(force=True)
                out = "ok"
            elif cmd[0] == "close":
                store.close()
                print("ok", flush=True)
                return
            else:
                out = f"error unknown command {cmd[0]}"
        except Exception as e:
            out = f"error {type(e).__name__}: {e}"
        print(out, flush=True)


if __name__ == "__main__":
    main()
