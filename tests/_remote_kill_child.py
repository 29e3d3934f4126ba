"""Child process of tests/test_remote_root.py: runs one side of a remote-root write and kills
itself with SIGKILL at a chosen point, as a lost executor or driver would stop.

    python tests/_remote_kill_child.py task WRITER_PICKLE PARTITION ATTEMPT ROWS
        a write task that dies during its upload (two files sent, the others not)
    python tests/_remote_kill_child.py driver WRITER_PICKLE ROWS
        a driver that runs two tasks, then dies in its commit: the stores are copied to their
        published names, the manifest is not created
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from typing import Any

import pyarrow as pa

from rocketstore import _remote
from rocketstore.spark import _writer


def batches(partition: int, rows: int) -> list[pa.RecordBatch]:
    """The rows of one partition: distinct bodies ``p<partition>-<i>``, 4 KiB each."""
    bodies = [f"p{partition}-{i}".encode().ljust(4096, b".") for i in range(rows)]
    return [
        pa.record_batch(
            [pa.array(["TopicA"] * len(chunk)), pa.array(chunk, pa.binary())],
            names=["topic", "body"],
        )
        for chunk in (bodies[i : i + 1000] for i in range(0, rows, 1000))
    ]


def as_task(partition: int, attempt: int) -> None:
    """Makes the writer see a Spark task identity (there is no TaskContext here). Only for this
    child process: it patches the module for good, so tests use their own monkeypatch."""
    _writer._task_identity = lambda: (partition, attempt, 0)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    mode = sys.argv[1]
    with open(sys.argv[2], "rb") as f:
        writer = pickle.load(f)
    if mode == "task":
        partition, attempt, rows = (int(a) for a in sys.argv[3:6])
        as_task(partition, attempt)
        _remote._UPLOAD_THREADS = 1  # files one at a time: two are complete when it dies
        real = _remote.RemoteRoot.filesystem
        opened = []
        lock = threading.Lock()

        def filesystem(self: _remote.RemoteRoot) -> Any:
            fs = real(self)

            class Dying:
                def __getattr__(self, name: str) -> Any:
                    return getattr(fs, name)

                def open_output_stream(self, path: str, **kw: Any) -> Any:
                    with lock:
                        opened.append(path)
                        if len(opened) > 2:
                            die()
                    return fs.open_output_stream(path, **kw)

            return Dying()

        _remote.RemoteRoot.filesystem = filesystem  # type: ignore[method-assign]
        writer.write(iter(batches(partition, rows)))
        raise SystemExit("the task was to be killed during its upload")
    if mode == "driver":
        rows = int(sys.argv[3])
        messages = []
        for p in (0, 1):
            as_task(p, 100 + p)
            messages.append(writer.write(iter(batches(p, rows))))

        def create_exclusive(self: _remote.RemoteRoot, rel: str, data: bytes) -> None:
            die()

        _remote.RemoteRoot.create_exclusive = create_exclusive  # type: ignore[method-assign]
        writer.commit(messages)
        raise SystemExit("the driver was to be killed before its commit")
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
