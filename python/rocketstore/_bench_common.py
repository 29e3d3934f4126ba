"""What the parts of ``rocketstore bench`` share: the figure record, the data's shape, and the
waits on a store (``_bench``, ``_bench_peers``)."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["QUEUES", "TOPICS", "Figure", "has", "tree_cpu_seconds", "wait_dispatched"]

TOPICS = 4
QUEUES = 8
_MB = 1e6


@dataclass
class Figure:
    """One measured figure."""

    name: str
    size: int
    messages: int = 0
    seconds: float = 0.0
    body_bytes: int = 0
    cpu_seconds: float = 0.0
    baseline: str | None = None
    ratio: float | None = None
    skipped: str | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.body_bytes / self.seconds / _MB if self.seconds > 0 else 0.0

    @property
    def cpu_ns_per_msg(self) -> float:
        return self.cpu_seconds * 1e9 / self.messages if self.messages else 0.0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["msgs_per_s"] = self.msgs_per_s
        d["mb_per_s"] = self.mb_per_s
        d["cpu_ns_per_msg"] = self.cpu_ns_per_msg
        return d


def has(store: Any, method: str) -> bool:
    return callable(getattr(store, method, None))


def wait_dispatched(store: Any, limit_s: float = 120.0) -> float:
    """Seconds until every record is in the consume queues and index (polls ``stats()``)."""
    t0 = time.perf_counter()
    if not has(store, "stats"):
        time.sleep(0.5)
        return time.perf_counter() - t0
    while store.stats().get("dispatch_behind_bytes", 0) > 0:
        if time.perf_counter() - t0 > limit_s:
            break
        time.sleep(0.001)
    return time.perf_counter() - t0


def tree_cpu_seconds() -> float:
    """CPU time of this process and every descendant (Spark's JVM, its Python workers).

    Sums ``utime + stime + cutime + cstime`` from ``/proc`` over the process tree: a child
    that exits and is reaped by a parent in the tree moves into that parent's ``cutime``, so
    the sum only grows. 0.0 where ``/proc`` is missing.
    """
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    stats: dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0.0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                text = fh.read()
        except OSError:
            continue
        rest = text[text.rindex(")") + 2 :].split()
        stats[int(name)] = (int(rest[1]), sum(int(x) for x in rest[11:15]))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0))[1]
        todo.extend(children.get(pid, []))
    return total / tick
