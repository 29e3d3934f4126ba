"""What the parts of ``rocketstore bench`` share: the figure record, the data's shape, and the
waits on a store (``_bench``, ``_bench_peers``)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["QUEUES", "TOPICS", "Figure", "has", "wait_dispatched"]

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
