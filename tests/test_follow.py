"""Read-only handles that follow a writer in another process (issue 40, part 1).

The writer publishes its dispatch progress in ``<root>/rocketstore.progress``; a read-only store
maps it, catches up when it moves and waits on it (FUTEX_WAIT) in ``pull``/``wait_progress``.
Writers here run in child processes (``_follow_child.py``) driven over stdin/stdout, so the
reader really is another process; one is killed with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import rocketstore
from rocketstore import GetMessageStatus, MessageStore

CHILD = Path(__file__).with_name("_follow_child.py")


class Writer:
    """A writer process: ``put TOPIC QID N [SIZE]``, ``flush``, ``clean``, ``close``."""

    def __init__(self, root: Path, **config: object) -> None:
        args = [sys.executable, str(CHILD), str(root)]
        args += [f"{k}={v}" for k, v in config.items()]
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        assert self.ask("ping") == "pong"

    def ask(self, line: str) -> str:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        out = self.proc.stdout.readline().strip()
        if out.startswith("error"):
            raise AssertionError(out)
        return out

    def put(self, topic: str, qid: int, n: int, size: int = 16) -> list[int]:
        return [int(x) for x in self.ask(f"put {topic} {qid} {n} {size}").split()]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.ask("close")
            self.proc.wait(30)
        self._pipes()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._pipes()

    def _pipes(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()


def wait_until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def test_reader_follows_writer_in_another_process(store_dir: Path) -> None:
    w = Writer(store_dir)
    try:
        w.put("T", 0, 1)
        with MessageStore(store_dir, read_only=True) as r:
            wait_until(lambda: r.max_offset_in_queue("T", 0) == 1)
            w.put("T", 0, 5)
            # The writer answers once put returned; dispatch makes it visible right after.
            wait_until(lambda: r.max_offset_in_queue("T", 0) == 6)
            got = r.get_message("T", 0, 1, 32)
            assert got.status is GetMessageStatus.FOUND
            assert [m.queue_offset for m in got.messages] == [1, 2, 3, 4, 5]
            assert r.max_commitlog_offset() > 0
            # A queue and a topic created after the reader opened.
            w.put("U", 3, 2)
            wait_until(lambda: r.max_offset_in_queue("U", 3) == 2)
            assert ("U", 3, 0, 2) in r.consume_queues()
            batch, nxt = r.get_message_arrow("U", 3, 0)
            assert batch.num_rows == 2
            assert nxt == 2
            # Key lookups see the new records (keys are "k-<topic>-<qid>-<offset>").
            wait_until(lambda: len(r.query_message("U", "k-U-3-1")) == 1)
    finally:
        w.close()


def test_pull_wakes_on_a_put_in_another_process(store_dir: Path) -> None:
    w = Writer(store_dir)
    try:
        w.put("T", 0, 1)
        with MessageStore(store_dir, read_only=True) as r:
            wait_until(lambda: r.max_offset_in_queue("T", 0) == 1)
            result: list[object] = []

            def pull() -> None:
                result.append(r.pull("T", 0, 1, timeout_ms=20_000))

            t = threading.Thread(target=pull)
            t.start()
            time.sleep(0.2)
            assert not result  # waiting
            w.put("T", 0, 1)
            t.join(20)
            assert result
            got = result[0]
            assert isinstance(got, rocketstore.GetResult)
            assert got.status is GetMessageStatus.FOUND
            assert [m.queue_offset for m in got.messages] == [1]
            seq = r.progress_seq()
            assert seq is not None
            t0 = time.monotonic()
            assert r.wait_progress(seq, timeout_ms=50) == seq  # nothing came: times out
            assert time.monotonic() - t0 >= 0.04
    finally:
        w.close()


def test_idle_pull_uses_no_cpu(store_dir: Path) -> None:
    w = Writer(store_dir)
    try:
        w.put("T", 0, 1)
        with MessageStore(store_dir, read_only=True) as r:
            wait_until(lambda: r.max_offset_in_queue("T", 0) == 1)
            before = os.times()
            got = r.pull("T", 0, 1, timeout_ms=1000)
            after = os.times()
            assert got.status is not GetMessageStatus.FOUND
            cpu = (after.user - before.user) + (after.system - before.system)
            # A spinning wait would burn ~1 s; a futex wait burns nothing measurable.
            assert cpu < 0.2
    finally:
        w.close()


def test_reader_survives_writer_kill_and_restart(store_dir: Path) -> None:
    w = Writer(store_dir)
    w.put("T", 0, 10)
    with MessageStore(store_dir, read_only=True) as r:
        wait_until(lambda: r.max_offset_in_queue("T", 0) == 10)
        w.put("T", 0, 5)
        w.kill()
        # What was published before the kill stays readable (the rest is dispatched and
        # published by the next writer's recovery).
        assert r.max_offset_in_queue("T", 0) >= 10
        w = Writer(store_dir)
        try:
            w.put("T", 0, 5)
            wait_until(lambda: r.max_offset_in_queue("T", 0) == 20)
            got = r.get_message("T", 0, 0, 100)
            assert [m.queue_offset for m in got.messages] == list(range(20))
            assert all(m.body.startswith(b"T-0-") for m in got.messages)
        finally:
            w.close()


def test_reader_across_file_rolls_and_expired_file_cleanup(store_dir: Path) -> None:
    # 64 KiB commit log files: 1 KiB messages roll a file every ~60 messages.
    cfg = {"mapped_file_size_commit_log": 65536, "mapped_file_size_consume_queue": 6000}
    w = Writer(store_dir, **cfg)
    try:
        w.put("T", 0, 10, 1024)
        with MessageStore(store_dir, read_only=True) as r:
            files_at_open = len(r.commitlog_files())
            w.put("T", 0, 400, 1024)
            wait_until(lambda: r.max_offset_in_queue("T", 0) == 410)
            assert len(r.commitlog_files()) > files_at_open + 4
            got = r.get_message("T", 0, 0, 1000)
            assert [m.queue_offset for m in got.messages][:5] == [0, 1, 2, 3, 4]
            first_msg = r.get_message("T", 0, 0, 1).messages[0]
            # The writer deletes every file but the last (force), readers keep no SIGBUS.
            w.ask("clean")
            wait_until(lambda: r.min_commitlog_offset() > 0)
            assert r.min_offset_in_queue("T", 0) > 0
            gone = r.get_message("T", 0, 0, 1)
            assert gone.status in (
                GetMessageStatus.OFFSET_TOO_SMALL,
                GetMessageStatus.MESSAGE_WAS_REMOVING,
            )
            assert gone.next_begin_offset == r.min_offset_in_queue("T", 0)
            with pytest.raises(rocketstore.MessageStoreError):
                r.look_message_by_offset(first_msg.commitlog_offset)
            # And it keeps following.
            w.put("T", 0, 3, 1024)
            wait_until(lambda: r.max_offset_in_queue("T", 0) == 413)
            tail = r.get_message("T", 0, 410, 10)
            assert [m.queue_offset for m in tail.messages] == [410, 411, 412]
    finally:
        w.close()


def test_progress_file_is_ignored_by_store_checks(store_dir: Path) -> None:
    w = Writer(store_dir)
    w.put("T", 0, 3)
    w.close()
    assert (store_dir / rocketstore_progress()).is_file()
    report = rocketstore.verify_store(store_dir)
    assert report.ok, report


def rocketstore_progress() -> str:
    return "rocketstore.progress"
