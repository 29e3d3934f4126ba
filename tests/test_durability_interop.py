"""A RocketMQ broker and rocketstore exclude each other on one store root, and an IPv4-mapped
born or store host is stored as IPv4 (issue 42).

A broker locks ``<root>/lock`` with ``FileChannel.tryLock``, a POSIX ``fcntl`` record lock: the
"broker" here is a child process taking one with :func:`fcntl.lockf`, as the JVM does.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import rocketstore
from rocketstore import MessageStore

CONFIG: dict[str, Any] = {"mapped_file_size_commit_log": 64 * 1024}

# Holds a broker-style lock on <root>/lock until its stdin closes.
BROKER_HOLDS = textwrap.dedent(
    """
    import fcntl, sys
    f = open(sys.argv[1], "a+b")
    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("held", flush=True)
    sys.stdin.read()
    """
)

# Tries a broker-style lock on <root>/lock once: prints "acquired" or "refused".
BROKER_TRIES = textwrap.dedent(
    """
    import fcntl, sys
    f = open(sys.argv[1], "a+b")
    try:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("refused")
    else:
        print("acquired")
    """
)


def broker_tries(store_dir: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", BROKER_TRIES, str(store_dir / "lock")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return proc.stdout.strip()


def test_a_broker_lock_refuses_a_writable_open(store_dir: Path) -> None:
    with MessageStore(store_dir, **CONFIG) as s:
        s.put("T", b"before the broker")
    with subprocess.Popen(
        [sys.executable, "-c", BROKER_HOLDS, str(store_dir / "lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as broker:
        assert broker.stdin is not None
        assert broker.stdout is not None
        try:
            assert broker.stdout.readline().strip() == "held"
            with pytest.raises(rocketstore.StoreLockedError):
                MessageStore(store_dir, **CONFIG)
            assert not (store_dir / "abort").exists()
            with MessageStore(store_dir, read_only=True, **CONFIG) as ro:
                assert [m.body for m in ro.scan()] == [b"before the broker"]
        finally:
            broker.stdin.close()
            broker.wait(timeout=60)
    with MessageStore(store_dir, **CONFIG) as s:
        assert s.put("T", b"after the broker").ok


def test_a_writable_store_refuses_a_broker_lock(store_dir: Path) -> None:
    with MessageStore(store_dir, **CONFIG) as s:
        assert broker_tries(store_dir) == "refused"
        # A second handle in this process is refused, and closing another descriptor of the
        # lock file (a classic POSIX lock would be dropped by that) keeps the store locked.
        with pytest.raises(rocketstore.StoreLockedError):
            MessageStore(store_dir, **CONFIG)
        open(store_dir / "lock", "rb").close()
        assert broker_tries(store_dir) == "refused"
        assert s.put("T", b"x").ok
    assert broker_tries(store_dir) == "acquired"


@pytest.mark.parametrize("delay_level", [0, 1])
def test_an_ipv4_mapped_host_is_stored_as_ipv4(store_dir: Path, delay_level: int) -> None:
    with MessageStore(store_dir, **CONFIG) as s:
        for born, store in [
            ("[::ffff:10.0.0.7]:1234", "[::ffff:10.0.0.1]:10911"),
            ("10.0.0.7:1234", "10.0.0.1:10911"),
        ]:
            r = s.put("T", b"host", born_host=born, store_host=store, delay_level=delay_level)
            assert r.ok
        mapped, plain = list(s.scan())
        # 4 address bytes, no IPv6 SYSFLAG bits (0x10 born host, 0x20 store host): the record a
        # Java producer makes for that host, which a broker's re-delivery re-encodes unchanged.
        assert mapped.born_host == "10.0.0.7:1234"
        assert mapped.store_host == "10.0.0.1:10911"
        assert mapped.sys_flag & 0x30 == 0
        assert mapped.store_size == plain.store_size
