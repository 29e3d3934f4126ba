"""``rocketstore bench --follow``: a reader in another process following a writer.

Figures (the writer is this process, the reader a child process with a read-only store):

========================  ==============================================================
figure                    what is measured
========================  ==============================================================
``follow_wake``           a ``pull`` waiting in the reader process, woken by one ``put`` in
                          the writer: latency from the writer's ``put`` returning to the
                          reader's ``pull`` returning (``time.perf_counter``, the system's
                          monotonic clock in both), p50/p99/p99.9; the baseline
                          ``pull_wake_local`` is the same wake with the pull in a thread of
                          the writer's process
``follow_idle``           the reader parked in ``pull`` for ``--seconds`` (at least 1 s) with
                          nothing arriving: its CPU time (``idle_cpu_pct``)
``follow_tail``           the writer ``put_batch``-es as fast as it can while the reader tails
                          the queue (``pull`` of up to 1,024): msgs/s and CPU ns/msg are the
                          reader's, from the first message to the last; the baseline
                          ``follow_write`` is the writer's own rate and CPU in the same run
========================  ==============================================================
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import rocketstore
from rocketstore._bench_common import Figure

__all__ = ["run_follow"]

_TOPIC = "BenchFollow"


def _reader_main(root: str) -> None:
    """The reader process: commands on stdin, one answer line each on stdout."""
    with rocketstore.MessageStore(root, read_only=True) as r:
        for line in sys.stdin:
            cmd = line.split()
            if cmd[0] == "pull":  # pull OFFSET TIMEOUT_MS: "ready", then "<t1> <n>"
                offset, timeout = int(cmd[1]), int(cmd[2])
                print("ready", flush=True)
                got = r.pull(_TOPIC, 0, offset, 1, timeout_ms=timeout)
                t1 = time.perf_counter()
                print(f"{t1!r} {len(got.messages)}", flush=True)
            elif cmd[0] == "idle":  # idle MS: CPU seconds of a pull that times out
                c0 = time.process_time()
                r.pull(_TOPIC, 1, 0, 1, timeout_ms=int(cmd[1]))
                print(f"{time.process_time() - c0!r}", flush=True)
            elif cmd[0] == "tail":  # tail FROM N: "ready", then "<seconds> <cpu>"
                offset, n = int(cmd[1]), int(cmd[2])
                print("ready", flush=True)
                end = offset + n
                t0 = c0 = None
                while offset < end:
                    got = r.pull(_TOPIC, 2, offset, 1024, timeout_ms=10_000)
                    if not got.messages:
                        break
                    if t0 is None:
                        t0, c0 = time.perf_counter(), time.process_time()
                    offset = got.next_begin_offset
                t1, c1 = time.perf_counter(), time.process_time()
                print(f"{t1 - (t0 or t1)!r} {c1 - (c0 or c1)!r} {offset}", flush=True)
            elif cmd[0] == "quit":
                return


class _Reader:
    def __init__(self, root: Path) -> None:
        code = (
            "import sys; from rocketstore._bench_follow import _reader_main; "
            "_reader_main(sys.argv[1])"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def read(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.send("quit")
            self.proc.wait(30)
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()


def _percentiles(fig: Figure, lat: list[float]) -> None:
    lat.sort()
    n = len(lat)

    def pct(p: float) -> float:
        return round(lat[min(n - 1, int(n * p))] * 1e6, 1)

    fig.messages = n
    fig.seconds = sum(lat)
    fig.extra.update(p50_us=pct(0.5), p99_us=pct(0.99), p999_us=pct(0.999), max_us=pct(1.0))
    fig.note = (
        f"p50 {fig.extra['p50_us']:.0f} us, p99 {fig.extra['p99_us']:.0f} us, "
        f"p99.9 {fig.extra['p999_us']:.0f} us ({n} wakes)"
    )


def _local_wake(store: Any, rounds: int, size: int) -> Figure:
    fig = Figure("pull_wake_local", size)
    body = b"l" * size
    lat: list[float] = []
    offset = store.max_offset_in_queue(_TOPIC, 3)
    for _ in range(rounds):
        box: dict[str, float] = {}
        ready = threading.Event()

        def pull(
            off: int = offset, ready: threading.Event = ready, box: dict[str, float] = box
        ) -> None:
            ready.set()
            store.pull(_TOPIC, 3, off, 1, timeout_ms=5000)
            box["t1"] = time.perf_counter()

        th = threading.Thread(target=pull, daemon=True)
        th.start()
        ready.wait()
        time.sleep(0.002)
        store.put(_TOPIC, body, queue_id=3)
        t0 = time.perf_counter()
        th.join(10)
        lat.append(max(box.get("t1", t0) - t0, 0.0))
        offset += 1
    _percentiles(fig, lat)
    fig.body_bytes = fig.messages * size
    return fig


def run_follow(
    base: Path,
    say: Any,
    *,
    rounds: int = 2000,
    seconds: float = 2.0,
    tail: int = 200_000,
    size: int = 100,
) -> list[Figure]:
    """The ``--follow`` figures (see the module documentation)."""
    root = Path(tempfile.mkdtemp(prefix="follow-", dir=base))
    figs: list[Figure] = []
    store = rocketstore.MessageStore(root)
    reader = _Reader(root)
    try:
        body = b"f" * size
        store.put(_TOPIC, body, queue_id=0)
        say(f"[{size} B] follow: {rounds} cross-process wakes ...")
        fig = Figure("follow_wake", size, baseline="pull_wake_local")
        lat: list[float] = []
        c0 = time.process_time()
        offset = 1
        for _ in range(rounds):
            reader.send(f"pull {offset} 5000")
            assert reader.read() == "ready"
            time.sleep(0.002)  # the pull is parked in the kernel
            store.put(_TOPIC, body, queue_id=0)
            t0 = time.perf_counter()
            t1, n = reader.read().split()
            if int(n) != 1:
                fig.skipped = "a pull returned no message"
                break
            lat.append(max(float(t1) - t0, 0.0))
            offset += 1
        fig.cpu_seconds = time.process_time() - c0
        if lat:
            _percentiles(fig, lat)
            fig.body_bytes = fig.messages * size
        figs.append(fig)
        figs.append(_local_wake(store, min(rounds, 500), size))
        idle_ms = max(int(seconds * 1000), 1000)
        say(f"[{size} B] follow: reader idle for {idle_ms} ms ...")
        reader.send(f"idle {idle_ms}")
        cpu = float(reader.read())
        idle = Figure("follow_idle", size, messages=0, seconds=idle_ms / 1000, cpu_seconds=cpu)
        idle.extra["idle_cpu_pct"] = round(cpu * 100 / (idle_ms / 1000), 3)
        idle.note = f"reader CPU while parked: {idle.extra['idle_cpu_pct']}%"
        figs.append(idle)
        say(f"[{size} B] follow: one reader tailing {tail:,} messages ...")
        reader.send(f"tail 0 {tail}")
        assert reader.read() == "ready"
        batch = 1024
        msgs = [{"topic": _TOPIC, "body": body, "queue_id": 2}] * batch
        w0, wc0 = time.perf_counter(), time.process_time()
        for i in range(0, tail, batch):
            store.put_batch(msgs[: min(batch, tail - i)])
        w1, wc1 = time.perf_counter(), time.process_time()
        secs, rcpu, reached = reader.read().split()
        write = Figure(
            "follow_write",
            size,
            messages=tail,
            seconds=w1 - w0,
            body_bytes=tail * size,
            cpu_seconds=wc1 - wc0,
        )
        read = Figure(
            "follow_tail",
            size,
            messages=int(reached),
            seconds=float(secs),
            body_bytes=int(reached) * size,
            cpu_seconds=float(rcpu),
            baseline="follow_write",
        )
        read.note = "one reader process tailing the writer (pull of up to 1,024)"
        figs += [read, write]
    finally:
        reader.close()
        store.close()
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return figs


if __name__ == "__main__":  # pragma: no cover - manual runs
    out = run_follow(Path(tempfile.gettempdir()), lambda m: print(m, file=sys.stderr))
    for f in out:
        print(f.name, f.msgs_per_s, f.cpu_ns_per_msg, f.extra, f.note)
    os._exit(0)
