"""Long polling: ``MessageStore.pull`` waits for a matching message with the GIL released.

Timings are reported (run with ``-s``) and asserted only loosely: the VM running the tests may
be paused or shared, so no test depends on wall-clock speed.
"""

from __future__ import annotations

import _thread
import signal
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketstore import GetMessageStatus, GetResult, MessageStore
from rocketstore.exceptions import InvalidMessageError, StoreClosedError

S = GetMessageStatus

#: Service threads on (the dispatcher wakes the waiters), small files.
CONFIG: dict[str, Any] = {
    "mapped_file_size_commit_log": 1024 * 1024,
    "mapped_file_size_consume_queue": 300 * 20,
    "max_hash_slot_num": 1000,
    "max_index_num": 4000,
}


@pytest.fixture
def store(store_dir: Path) -> Iterator[MessageStore]:
    with MessageStore(store_dir, **CONFIG) as s:
        yield s


def wait_for_waiters(store: MessageStore, n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while store.stats()["waiting_pulls"] < n:
        assert time.monotonic() < deadline, f"{n} pulls never started waiting"
        time.sleep(0.001)


def settle(store: MessageStore) -> None:
    """Waits until every put so far is dispatched to its consume queue."""
    deadline = time.monotonic() + 30
    while store.stats()["dispatch_behind_bytes"] > 0:
        assert time.monotonic() < deadline, "dispatch did not catch up"
        time.sleep(0.001)


class Puller(threading.Thread):
    """Runs one ``pull`` on its own thread and records when it returned."""

    def __init__(self, store: MessageStore, *args: Any, **kwargs: Any) -> None:
        super().__init__(daemon=True)
        self.store, self.args, self.kwargs = store, args, kwargs
        self.result: GetResult | None = None
        self.error: BaseException | None = None
        self.returned_at = 0.0

    def run(self) -> None:
        try:
            self.result = self.store.pull(*self.args, **self.kwargs)
        except BaseException as e:
            self.error = e
        self.returned_at = time.perf_counter()


def test_wake_latency(store: MessageStore) -> None:
    """A waiting pull returns as soon as a matching message is dispatched: the median latency
    from ``put`` to the waiter's return is reported; asserted only to be under 200 ms."""
    latencies = []
    for i in range(50):
        offset = store.max_offset_in_queue("T", 0)
        p = Puller(store, "T", 0, offset, timeout_ms=10_000)
        p.start()
        wait_for_waiters(store, 1)
        sent = time.perf_counter()
        store.put("T", f"m{i}".encode())
        p.join(15)
        assert p.error is None
        assert p.result is not None
        assert p.result.status is S.FOUND
        assert [m.body for m in p.result.messages] == [f"m{i}".encode()]
        assert p.result.next_begin_offset == offset + 1
        latencies.append(p.returned_at - sent)
    median = statistics.median(latencies)
    print(
        f"\nlong-poll wake latency over {len(latencies)} trials: median {median * 1e3:.2f} ms, "
        f"p90 {statistics.quantiles(latencies, n=10)[-1] * 1e3:.2f} ms, "
        f"max {max(latencies) * 1e3:.2f} ms"
    )
    assert median < 0.2


def test_wake_latency_on_the_main_thread(store: MessageStore) -> None:
    """On the main thread the wait is sliced (to handle signals); a put from another thread
    still wakes it at once."""
    latencies = []
    for i in range(10):
        offset = store.max_offset_in_queue("T", 0)
        sent: list[float] = []

        def producer(i: int = i, sent: list[float] = sent) -> None:
            wait_for_waiters(store, 1)
            sent.append(time.perf_counter())
            store.put("T", f"m{i}".encode())

        t = threading.Thread(target=producer)
        t.start()
        r = store.pull("T", 0, offset, timeout_ms=10_000)
        latencies.append(time.perf_counter() - sent[0])
        t.join()
        assert r.status is S.FOUND
        assert [m.body for m in r.messages] == [f"m{i}".encode()]
    print(f"\nmain-thread wake latency: median {statistics.median(latencies) * 1e3:.2f} ms")
    assert statistics.median(latencies) < 0.2


def test_non_matching_put_does_not_end_the_wait(store: MessageStore) -> None:
    """A message whose tag does not match wakes the waiter internally, but it keeps waiting
    (past that message) and returns without messages at the timeout; a matching one then ends
    the next wait."""
    p = Puller(store, "T", 0, 0, timeout_ms=600, tags="TagA")
    start = time.perf_counter()
    p.start()
    wait_for_waiters(store, 1)
    store.put("T", b"b", tags="TagB")
    p.join(10)
    elapsed = p.returned_at - start
    assert p.error is None
    assert p.result is not None
    assert p.result.messages == []
    assert p.result.status in (S.NO_MATCHED_MESSAGE, S.OFFSET_OVERFLOW_ONE)
    assert p.result.next_begin_offset == 1, "the non-matching message was skipped"
    assert elapsed >= 0.5, f"returned after {elapsed:.3f} s, before the timeout"
    p = Puller(store, "T", 0, 1, timeout_ms=10_000, tags="TagA || TagC")
    p.start()
    wait_for_waiters(store, 1)
    store.put("T", b"b2", tags="TagB")
    store.put("T", b"a", tags="TagA")
    p.join(15)
    assert p.result is not None
    assert p.result.status is S.FOUND
    assert [m.body for m in p.result.messages] == [b"a"]
    assert p.result.next_begin_offset == 3


def test_timeouts_and_immediate_answers(store: MessageStore) -> None:
    """At the queue's end the pull waits for the timeout and answers OFFSET_OVERFLOW_ONE; on an
    empty queue at offset 0 it waits and answers NO_MESSAGE_IN_QUEUE; answers that no arrival
    can change (OFFSET_OVERFLOW_BADLY, FOUND) come at once."""
    start = time.perf_counter()
    r = store.pull("Empty", 0, 0, timeout_ms=150)
    assert r.status is S.NO_MESSAGE_IN_QUEUE
    assert time.perf_counter() - start >= 0.14
    store.put("T", b"x")
    settle(store)
    start = time.perf_counter()
    r = store.pull("T", 0, 1, timeout_ms=150)
    assert r.status is S.OFFSET_OVERFLOW_ONE
    assert (r.next_begin_offset, r.messages) == (1, [])
    assert time.perf_counter() - start >= 0.14
    start = time.perf_counter()
    r = store.pull("T", 0, 5, timeout_ms=5_000)
    assert r.status is S.OFFSET_OVERFLOW_BADLY
    assert r.next_begin_offset == 1
    assert store.pull("T", 0, 0, timeout_ms=5_000).status is S.FOUND
    assert time.perf_counter() - start < 4.0, "answers that cannot change must not wait"
    r = store.pull("T", 0, 1, timeout_ms=0)
    assert r.status is S.OFFSET_OVERFLOW_ONE
    with pytest.raises(InvalidMessageError):
        store.pull("T", 0, 1, timeout_ms=-1)


def test_close_wakes_waiters(store: MessageStore) -> None:
    p = Puller(store, "T", 0, 0, timeout_ms=30_000)
    p.start()
    wait_for_waiters(store, 1)
    store.close()
    p.join(10)
    assert not p.is_alive()
    assert isinstance(p.error, StoreClosedError)


def test_keyboard_interrupt_ends_a_main_thread_pull(store: MessageStore) -> None:
    """Ctrl-C (SIGINT) interrupts a pull waiting on the main thread within about 0.1 s.

    Python's own SIGINT handler is installed for the test: another test of the same worker
    may have left a library's handler (a SparkContext installs one) or none, and
    ``interrupt_main`` does nothing where Python does not handle the signal."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        timer = threading.Timer(0.3, _thread.interrupt_main)
        start = time.perf_counter()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            store.pull("T", 0, 0, timeout_ms=30_000)
        elapsed = time.perf_counter() - start
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    print(f"\npull interrupted after {elapsed:.3f} s (interrupt sent at 0.3 s)")
    assert elapsed < 5.0
    assert store.stats()["waiting_pulls"] == 0


def process_cpu_seconds() -> float:
    return time.process_time()


def test_idle_waiters_use_no_cpu(store: MessageStore) -> None:
    """1,000 pulls waiting on threads sleep until their queue gets a message: the process's CPU
    time over about a second of idle waiting is reported, and asserted to be well under the
    wall time. One put then wakes all of them."""
    n = 1000
    pullers = [Puller(store, "Idle", i % 8, 0, timeout_ms=120_000) for i in range(n)]
    old = threading.stack_size(256 * 1024)
    try:
        for p in pullers:
            p.start()
    finally:
        threading.stack_size(old)
    wait_for_waiters(store, n, timeout=120)
    time.sleep(0.2)
    wall0, cpu0 = time.perf_counter(), process_cpu_seconds()
    time.sleep(1.0)
    wall, cpu = time.perf_counter() - wall0, process_cpu_seconds() - cpu0
    print(f"\n{n} idle waiters: {cpu:.4f} s CPU in {wall:.3f} s wall ({cpu / wall:.2%} of a core)")
    assert store.stats()["waiting_pulls"] == n
    assert cpu / wall < 0.2
    for q in range(8):
        store.put("Idle", f"q{q}".encode(), queue_id=q)
    for p in pullers:
        p.join(60)
    assert all(p.result is not None and p.result.status is S.FOUND for p in pullers)
    assert {p.result.messages[0].body for p in pullers if p.result} == {
        f"q{q}".encode() for q in range(8)
    }
    assert store.stats()["waiting_pulls"] == 0
