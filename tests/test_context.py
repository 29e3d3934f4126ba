"""Lifecycle: context manager, close, use after close, fork, pickling."""

from __future__ import annotations

import gc
import os
import pickle
import warnings
from pathlib import Path
from typing import Any

import pytest

from rocketstore import MessageStore
from rocketstore.exceptions import StoreClosedError, StoreForkedError

#: Small consume queue and index files: the defaults (6 MB per queue, a 420 MB index file)
#: make every store in a test slow to create and to checksum.
SIDE_FILES: dict[str, Any] = {
    "mapped_file_size_consume_queue": 20 * 1024,
    "max_hash_slot_num": 1024,
    "max_index_num": 4096,
}

SMALL: dict[str, Any] = {**SIDE_FILES, "mapped_file_size_commit_log": 64 * 1024}


def is_closed(store: MessageStore) -> bool:
    return store.closed


def test_context_manager_closes(store_dir: Path) -> None:
    with MessageStore(store_dir, **SMALL) as store:
        assert isinstance(store, MessageStore)
        assert not is_closed(store)
        store.put("T", b"x")
    assert is_closed(store)
    assert not (store_dir / "abort").exists(), "a clean close removes the abort marker"
    # The lock is released: another handle can open the directory at once.
    with MessageStore(store_dir, **SMALL) as again:
        assert again.recovery_report["abnormal"] is False
        assert [m.body for m in again.scan()] == [b"x"]


def test_exit_closes_and_does_not_swallow(store_dir: Path) -> None:
    handles: list[MessageStore] = []

    def use() -> None:
        with MessageStore(store_dir, **SMALL) as s:
            handles.append(s)
            s.put("T", b"x")
            raise KeyError("boom")

    with pytest.raises(KeyError):
        use()
    store = handles[0]
    assert store.closed
    assert store.__exit__(None, None, None) is False


def test_use_after_close(store_dir: Path) -> None:
    store = MessageStore(store_dir, **SMALL)
    r = store.put("T", b"x")
    it = store.scan()
    store.close()
    store.close()  # idempotent
    assert store.closed
    calls = [
        lambda: store.put("T", b"x"),
        lambda: store.put_batch([{"topic": "T", "body": b"x"}]),
        lambda: store.look_message_by_offset(r.commitlog_offset),
        store.scan,
        store.min_commitlog_offset,
        store.max_commitlog_offset,
        store.flush,
        store.cursors,
        store.queue_offsets,
        store.flush_count,
        store.commitlog_files,
        lambda: store.config,
        lambda: store.recovery_report,
        store.__enter__,
        lambda: next(it),
        lambda: it.next_batch(10),
    ]
    for call in calls:
        with pytest.raises(StoreClosedError):
            call()
    assert store.path == str(store_dir)
    assert store.read_only is False


def test_store_without_close_is_closed_when_collected(store_dir: Path) -> None:
    store = MessageStore(store_dir, **SMALL)
    store.put("T", b"x")
    del store
    gc.collect()
    with MessageStore(store_dir, **SMALL) as again:
        assert again.recovery_report["abnormal"] is False
        assert again.put("T", b"y").queue_offset == 1


def test_handles_cannot_be_pickled(store_dir: Path) -> None:
    with (
        MessageStore(store_dir, **SMALL) as store,
        pytest.raises(TypeError, match="cannot be pickled"),
    ):
        pickle.dumps(store)


def _fork() -> int:
    with warnings.catch_warnings():
        # Python 3.12+ warns that forking a multi-threaded process may deadlock; the child
        # below only raises and exits, which is what the test is about.
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def _child(check: Any) -> None:  # pragma: no cover - runs in the forked child
    try:
        code = 0 if check() else 3
    except BaseException:
        code = 4
    os._exit(code)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_gets_store_forked_error(store_dir: Path) -> None:
    store = MessageStore(store_dir, **SMALL)
    store.put("T", b"before fork")
    it = store.scan()

    def check() -> bool:
        calls = [
            lambda: store.put("T", b"from child"),
            lambda: store.look_message_by_offset(0),
            store.scan,
            store.flush,
            store.close,
            lambda: store.closed,
            lambda: store.__exit__(None, None, None),
            lambda: next(it),
        ]
        for call in calls:
            try:
                call()
            except StoreForkedError as e:
                if "fork" not in str(e):
                    return False
            else:
                return False
        # Dropping the inherited handle in the child must neither hang nor touch the files.
        return "forked" in repr(store)

    pid = _fork()
    if pid == 0:  # pragma: no cover - child
        _child(check)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's handle is untouched.
    assert store.put("T", b"after fork").queue_offset == 1
    store.close()
    with MessageStore(store_dir, **SMALL) as again:
        assert again.recovery_report["abnormal"] is False
        assert [m.body for m in again.scan()] == [b"before fork", b"after fork"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_dropping_the_handle_leaves_the_parent_alone(store_dir: Path) -> None:
    # Only the list refers to the handle and its iterator, so clearing it in the child runs
    # their native destructors there.
    handles: list[Any] = [MessageStore(store_dir, **SMALL)]
    handles[0].put("T", b"x")
    handles.append(handles[0].scan())
    abort_before = (store_dir / "abort").exists()

    def check() -> bool:
        handles.clear()
        gc.collect()
        return True

    pid = _fork()
    if pid == 0:  # pragma: no cover - child
        _child(check)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (store_dir / "abort").exists() == abort_before, "the child must not close the store"
    store = handles[0]
    assert store.put("T", b"y").ok
    assert [m.body for m in handles[1]] == [b"x", b"y"]
    store.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_child_may_open_its_own_store(tmp_path: Path) -> None:
    parent = MessageStore(tmp_path / "parent", **SMALL)

    def check() -> bool:
        with MessageStore(tmp_path / "child", **SMALL) as mine:
            return mine.put("T", b"child").ok

    pid = _fork()
    if pid == 0:  # pragma: no cover - child
        _child(check)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    parent.close()
    with MessageStore(tmp_path / "child", read_only=True, **SIDE_FILES) as ro:
        assert [m.body for m in ro.scan()] == [b"child"]


def test_close_racing_puts_from_other_threads(store_dir: Path) -> None:
    import threading
    import time

    from rocketstore.exceptions import MessageStoreError

    store = MessageStore(store_dir, **SMALL)
    outcomes: list[str] = []
    written: list[int] = []

    def writer() -> None:
        count = 0
        try:
            while True:
                store.put("Race", b"x" * 50)
                store.put_batch([{"topic": "Race", "body": b"y" * 50}] * 10)
                count += 11
        except StoreClosedError:
            outcomes.append("closed")
        except MessageStoreError as e:  # pragma: no cover - reported by the assertion
            outcomes.append(f"{type(e).__name__}: {e}")
        written.append(count)

    threads = [threading.Thread(target=writer) for _ in range(3)]
    for th in threads:
        th.start()
    time.sleep(0.2)
    store.close()
    for th in threads:
        th.join(timeout=60)
    assert outcomes == ["closed"] * 3
    with MessageStore(store_dir, read_only=True, **SMALL) as ro:
        assert ro.recovery_report["abnormal"] is False
        # Every acknowledged put is there (a put racing close may land or be refused).
        assert sum(1 for _ in ro.scan(verify_crc=True)) >= sum(written)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_arrow_reads_in_a_child_forked_during_reads(store_dir: Path) -> None:
    # The Arrow reads' buffer pool is process-wide; a child forked while a parent thread held
    # its lock must still read (the child bypasses the pool) instead of blocking forever.
    import threading
    import time

    with MessageStore(store_dir, **SMALL) as w:
        w.put_batch([{"topic": "T", "body": b"m%05d" % i} for i in range(3000)])
    reader = MessageStore(store_dir, read_only=True, **SIDE_FILES)
    stop = threading.Event()

    def read_loop() -> None:
        while not stop.is_set():
            reader.read_arrow(0, max_messages=1000)

    thread = threading.Thread(target=read_loop)
    thread.start()

    def check() -> bool:
        with MessageStore(store_dir, read_only=True, **SIDE_FILES) as mine:
            rows = 0
            offset = 0
            while True:
                batch, offset = mine.read_arrow(offset, max_messages=1000)
                if batch.num_rows == 0:
                    break
                rows += batch.num_rows
            return rows == 3000

    try:
        for _ in range(5):
            pid = _fork()
            if pid == 0:  # pragma: no cover - child
                _child(check)
            deadline = time.monotonic() + 60
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    pytest.fail("the forked child hung in an Arrow read")
                time.sleep(0.01)
            assert os.waitstatus_to_exitcode(status) == 0
    finally:
        stop.set()
        thread.join()
        reader.close()
