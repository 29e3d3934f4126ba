"""A store never dies by a signal on a full disk.

A writer in a child process puts 1 KiB messages into a store on a small file system until the
disk is full: on ext2 (no ``fallocate``: space is made real with ``pwrite`` before a page is
written through a mapping) and on a size-limited tmpfs, through ``put()`` and ``put_batch``.
Each run must end with a typed error (``DiskFullError``, a ``StoreIOError``), never a signal
(SIGBUS); every message acknowledged ``PUT_OK`` must be readable after the store is copied to
a disk with room and reopened for writing.

The file systems are mounted by the test (root and ``mount`` needed: skipped with the reason
otherwise).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from rocketstore import MessageStore

IN_CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def skip_or_fail(reason: str) -> NoReturn:
    """Skip where the file systems cannot be mounted; fail in CI (it runs as root)."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: the full-disk runs must run)")
    pytest.skip(reason)


pytestmark = pytest.mark.crash

# 8 MiB commit log files and small index / consume queue files: the disk fills after a few
# files, as on a real disk with default sizes, in a fraction of the time.
CONFIG: dict[str, Any] = {
    "mapped_file_size_commit_log": 8 << 20,
    "mapped_file_size_consume_queue": 20 * 20_000,
    "max_hash_slot_num": 10_000,
    "max_index_num": 40_000,
}

WRITER = r"""
import json, os, sys
from rocketstore import MessageStore, MessageStoreError

root, mode, ledger_path = sys.argv[1], sys.argv[2], sys.argv[3]
config = json.loads(sys.argv[4])
body = b"b" * 1024
ledger = open(ledger_path, "w", buffering=1)
n = 0
error = None
try:
    with MessageStore(root, **config) as store:
        while n < 1_000_000:
            if mode == "put":
                r = store.put("Full", body + str(n).encode(), keys=f"k{n}")
                if not r.ok:
                    error = f"status {r.status}"
                    break
                ledger.write(f"{n} {r.commitlog_offset}\n")
                n += 1
            else:
                batch = [{"topic": "Full", "body": body + str(i).encode(), "keys": f"k{i}"}
                         for i in range(n, n + 50)]
                for i, r in zip(range(n, n + 50), store.put_batch(batch)):
                    if not r.ok:
                        error = f"status {r.status}"
                        break
                    ledger.write(f"{i} {r.commitlog_offset}\n")
                n += 50
                if error:
                    break
except MessageStoreError as e:
    error = f"{type(e).__name__}: {e}"
ledger.close()
print(json.dumps({"error": error, "acked": n}))
sys.exit(0 if error else 3)
"""


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


def _mount_or_skip(kind: str, mnt: Path, tmp: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        skip_or_fail(f"mounting a {kind} file system needs root")
    mnt.mkdir()
    loop = None
    if kind == "tmpfs":
        r = _run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(mnt)])
    else:
        image = tmp / "ext2.img"
        with open(image, "wb") as f:
            f.truncate(48 << 20)
        mk = _run(["mkfs.ext2", "-q", "-F", str(image)])
        if mk.returncode != 0:
            skip_or_fail(f"mkfs.ext2 failed: {mk.stderr.strip()}")
        lo = _run(["losetup", "--find", "--show", str(image)])
        if lo.returncode != 0:
            skip_or_fail(f"no loop device: {lo.stderr.strip()}")
        loop = lo.stdout.strip()
        r = _run(["mount", "-t", "ext2", loop, str(mnt)])
    if r.returncode != 0:
        if loop:
            _run(["losetup", "-d", loop])
        skip_or_fail(f"cannot mount {kind}: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        _run(["umount", "-l", str(mnt)])
        if loop:
            _run(["losetup", "-d", loop])


@pytest.fixture(params=["ext2", "tmpfs"])
def small_fs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A freshly mounted, nearly 40 MB file system: ext2 (no fallocate) or tmpfs."""
    yield from _mount_or_skip(request.param, tmp_path / f"mnt-{uuid.uuid4().hex[:8]}", tmp_path)


@pytest.mark.parametrize("mode", ["put", "put_batch"])
def test_a_full_disk_is_a_typed_error_and_loses_no_acknowledged_message(
    small_fs: Path, tmp_path: Path, mode: str
) -> None:
    root = small_fs / "store"
    ledger = tmp_path / "ledger.txt"
    child = subprocess.run(
        [sys.executable, "-c", WRITER, str(root), mode, str(ledger), json.dumps(CONFIG)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    if child.returncode < 0:
        name = signal.Signals(-child.returncode).name
        pytest.fail(f"the writer died by signal {name}: {child.stderr[-2000:]}")
    assert child.returncode == 0, f"no typed error: {child.stdout} {child.stderr[-2000:]}"
    outcome = json.loads(child.stdout.strip().splitlines()[-1])
    # DiskFullError for the put that met the full disk, not a fenced store.
    assert outcome["error"].startswith("DiskFullError"), outcome

    acked: dict[int, int] = {}
    for line in ledger.read_text().splitlines():
        n, offset = line.split()
        acked[int(n)] = int(offset)
    assert len(acked) > 1000, f"the disk filled after {len(acked)} messages"

    # On a disk with room, the store opens for writing, and every acknowledged message is there.
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    with MessageStore(copy, **CONFIG) as store:
        # The forced cleanup of a nearly full disk (RocketMQ's cleanFileForciblyEnable, on by
        # default) may have deleted the oldest commit log files whole; everything after them
        # is there.
        first = store.min_commitlog_offset()
        kept = {i: at for i, at in acked.items() if at >= first}
        assert len(kept) > 1000, (first, len(acked))
        for i, at in kept.items():
            msg = store.look_message_by_offset(at)
            assert msg.body == b"b" * 1024 + str(i).encode(), i
        more = store.put("Full", b"after", keys="after")
        assert more.commitlog_offset > max(acked.values())
