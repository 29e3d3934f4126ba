"""Consumer offsets (``commit_offset`` / ``query_offset``) and the broker config files.

Offsets live in ``config/consumerOffset.json`` in the shape a RocketMQ broker writes it
(fastjson: ``{"offsetTable": {"topic@group": {0: 5, 1: 3}}}`` with bare integer queue ids), with
the previous version kept in ``consumerOffset.json.bak``. They are saved within about a second
of a commit (the consume queue flush service), on ``flush()`` and on close.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from rocketstore import MessageStore
from rocketstore.exceptions import InvalidMessageError

CONFIG: dict[str, Any] = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 300 * 20,
    "max_hash_slot_num": 1000,
    "max_index_num": 4000,
}


def load_fastjson(path: Path) -> Any:
    """Parses a broker config file as RocketMQ writes it: fastjson leaves integer map keys
    unquoted, which strict JSON does not allow."""
    text = path.read_text(encoding="utf-8")
    return json.loads(re.sub(r"([{,]\s*)(-?\d+)\s*:", r'\1"\2":', text))


def test_commit_and_query(store_dir: Path) -> None:
    with MessageStore(store_dir, **CONFIG) as s:
        assert s.query_offset("g", "T", 0) == -1
        s.commit_offset("g", "T", 0, 5)
        s.commit_offset("g", "T", 0, 7)  # a later commit replaces the offset
        s.commit_offset("g", "T", 3, 1)
        s.commit_offset("other", "T", 0, 2)
        assert s.query_offset("g", "T", 0) == 7
        assert s.query_offset("g", "T", 3) == 1
        assert s.query_offset("other", "T", 0) == 2
        assert s.query_offset("g", "U", 0) == -1
        for bad in (
            lambda: s.commit_offset("", "T", 0, 1),
            lambda: s.commit_offset("bad group", "T", 0, 1),
            lambda: s.commit_offset("g", "T", 0, -1),
            lambda: s.commit_offset("g", "bad topic", 0, 1),
        ):
            with pytest.raises(InvalidMessageError):
                bad()


def test_offsets_survive_close_and_reopen(store_dir: Path) -> None:
    with MessageStore(store_dir, **CONFIG) as s:
        s.put("T", b"x")
        s.commit_offset("g", "T", 0, 1)
        s.commit_offset("g", "T", 1, 42)
    with MessageStore(store_dir, **CONFIG) as s:
        assert s.query_offset("g", "T", 0) == 1
        assert s.query_offset("g", "T", 1) == 42
        s.commit_offset("g", "T", 0, 2)
    with MessageStore(store_dir, read_only=True, **CONFIG) as ro:
        assert ro.query_offset("g", "T", 0) == 2
        assert ro.query_offset("g", "T", 1) == 42


CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    import rocketstore

    root, mode = sys.argv[1], sys.argv[2]
    store = rocketstore.MessageStore(root, **{config!r})
    store.put("T", b"x")
    store.commit_offset("g", "T", 0, 11)
    store.commit_offset("g", "T", 1, 22)
    if mode == "flush":
        store.flush()
    else:  # wait for the periodic save (about a second), watching the file
        path = os.path.join(root, "config", "consumerOffset.json")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if '"T@g"' in open(path).read():
                    break
            except OSError:
                pass
            time.sleep(0.05)
    print("ready", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.parametrize("mode", ["flush", "periodic"])
def test_offsets_survive_kill_9(store_dir: Path, mode: str) -> None:
    """A process commits offsets, they are saved (by ``flush()``, or by the periodic save
    without any call), and the process is killed with SIGKILL: a new open finds them."""
    script = CHILD.format(config=CONFIG)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(store_dir), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout.strip() == "ready"
    assert (store_dir / "abort").exists(), "the child must have died without closing"
    with MessageStore(store_dir, **CONFIG) as s:
        assert s.recovery_report["abnormal"]
        assert s.query_offset("g", "T", 0) == 11
        assert s.query_offset("g", "T", 1) == 22


def test_consumer_offset_file_format(store_dir: Path) -> None:
    with MessageStore(store_dir, **CONFIG) as s:
        s.commit_offset("g1", "T", 0, 5)
        s.commit_offset("g1", "T", 1, 3)
        s.flush()
        s.commit_offset("g2", "%RETRY%g2", 0, 9)
        s.commit_offset("g1", "T", 0, 6)
    path = store_dir / "config" / "consumerOffset.json"
    raw = path.read_text(encoding="utf-8")
    assert re.search(r"[{,]0:6\b", raw), "queue ids are bare integers, as fastjson writes them"
    table = load_fastjson(path)["offsetTable"]
    assert table == {"T@g1": {"0": 6, "1": 3}, "%RETRY%g2@g2": {"0": 9}}
    # The previous save is kept next to it, as RocketMQ's MixAll.string2File does.
    bak = load_fastjson(path.with_name("consumerOffset.json.bak"))["offsetTable"]
    assert bak == {"T@g1": {"0": 5, "1": 3}}


def test_a_broker_written_offset_file_is_read(store_dir: Path) -> None:
    """A consumerOffset.json written by a broker (fastjson style) is loaded; a damaged file
    falls back to the .bak copy."""
    config = store_dir / "config"
    config.mkdir(parents=True)
    (config / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"TopicTest@cg":{0:12,1:7,2:0},\n\t\t"%RETRY%cg@cg":{0:1}\n\t}\n}'
    )
    with MessageStore(store_dir, **CONFIG) as s:
        assert s.query_offset("cg", "TopicTest", 0) == 12
        assert s.query_offset("cg", "TopicTest", 1) == 7
        assert s.query_offset("cg", "TopicTest", 2) == 0
        assert s.query_offset("cg", "%RETRY%cg", 0) == 1
    (config / "consumerOffset.json.bak").write_text('{"offsetTable":{"T@g":{0:4}}}')
    (config / "consumerOffset.json").write_text('{"offsetTable":{"T@g":{0:')  # torn
    with MessageStore(store_dir, read_only=True, **CONFIG) as ro:
        assert ro.query_offset("g", "T", 0) == 4


def test_topics_json_has_queue_counts(store_dir: Path) -> None:
    with MessageStore(store_dir, **CONFIG) as s:
        for q in (0, 3):
            s.put("Orders", b"x", queue_id=q)
        s.put("Audit", b"x")
        s.flush()
    deadline = time.monotonic() + 10
    path = store_dir / "config" / "topics.json"
    while not path.exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    doc = load_fastjson(path)
    table = doc["topicConfigTable"]
    assert table["Orders"]["topicName"] == "Orders"
    assert table["Orders"]["readQueueNums"] >= 4
    assert table["Orders"]["writeQueueNums"] >= 4
    assert table["Audit"]["readQueueNums"] >= 1
    assert "dataVersion" in doc
    assert os.path.getsize(path) > 0
