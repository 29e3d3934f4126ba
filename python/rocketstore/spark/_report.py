"""The result of :func:`rocketstore.spark.verify`: named checks, per-store figures, a plot.

A :class:`VerifyReport` holds one :class:`Check` per kind of verification (``crc``,
``framing``, ``consume_queue``, ``gap_free``, ``index``, ``manifest``, ``source``); each
counts what it looked at, what failed and keeps a few examples that say where (store, file,
commit log offset, topic/queue/queue offset or the differing row). ``report.ok`` is true
when no check failed.

Example::

    report = verify(spark, "/data/stores", expected=df)
    print(report)  # a table, one line per check
    if not report.ok:
        for name, check in report.checks.items():
            if not check.passed:
                print(name, check.failed, check.examples[:3])
    report.write("/tmp/verify.json")  # also /tmp/verify.png (messages per store and queue)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CHECKS", "Check", "VerifyReport"]

#: Every check :func:`~rocketstore.spark.verify` runs, with what it proves.
CHECKS: dict[str, str] = {
    "crc": "every record's body CRC matches its body",
    "framing": "records are well formed and contiguous from the first offset to the end; "
    "recovery found no torn tail",
    "consume_queue": "every consume queue unit points at a record with the same size, "
    "topic, queue, queue offset and tags code; every record has its unit",
    "gap_free": "every queue's offsets are contiguous from its min to its max (units and "
    "records), without duplicates",
    "index": "an index lookup (query_message) of every key finds its record",
    "manifest": "the _SUCCESS manifest matches the stores: count, bytes, offsets, "
    "per-queue counts, body digest",
    "source": "the stored messages equal the source DataFrame (both ways, with "
    "multiplicity) on topic, queue, keys, tags and body: per-queue counts and sums of "
    "xxhash64 digests; if they differ, a join on the SHA-256 of the body names the rows",
}

#: Examples kept per check (the counts are always complete).
MAX_EXAMPLES = 10


@dataclass
class Check:
    """One kind of verification, summed over every store.

    ``checked`` counts the items looked at (records, units, queues, keys, fields or rows),
    ``failed`` those that failed, ``skipped`` those that could not be decided (for example
    a key shared by more messages than one index query returns); ``examples`` says where
    the first failures are; ``notes`` qualify the result (a sample, a missing manifest).
    """

    name: str
    checked: int = 0
    failed: int = 0
    skipped: int = 0
    examples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ran: bool = True

    @property
    def passed(self) -> bool:
        """True if nothing failed (a check that did not run counts as passed)."""
        return self.failed == 0

    @property
    def description(self) -> str:
        """What the check proves."""
        return CHECKS.get(self.name, self.name)

    @property
    def status(self) -> str:
        """``"passed"``, ``"FAILED"`` or ``"not run"``."""
        if not self.ran:
            return "not run"
        return "passed" if self.passed else "FAILED"

    def fail(self, example: str, count: int = 1) -> None:
        """Counts ``count`` failures and keeps ``example`` while there is room."""
        self.failed += count
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)

    def note(self, text: str) -> None:
        """Adds a note once."""
        if text not in self.notes:
            self.notes.append(text)

    def merge(self, other: Check) -> None:
        """Adds another store's result of the same check."""
        self.checked += other.checked
        self.failed += other.failed
        self.skipped += other.skipped
        self.ran = self.ran or other.ran
        for e in other.examples:
            if len(self.examples) < MAX_EXAMPLES:
                self.examples.append(e)
        for n in other.notes:
            self.note(n)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``passed`` included)."""
        return {
            "name": self.name,
            "passed": self.passed,
            "status": self.status,
            "checked": self.checked,
            "failed": self.failed,
            "skipped": self.skipped,
            "examples": list(self.examples),
            "notes": list(self.notes),
            "description": self.description,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Check:
        """The inverse of :meth:`to_dict`."""
        return cls(
            name=str(data["name"]),
            checked=int(data.get("checked", 0)),
            failed=int(data.get("failed", 0)),
            skipped=int(data.get("skipped", 0)),
            examples=[str(e) for e in data.get("examples", [])],
            notes=[str(n) for n in data.get("notes", [])],
            ran=data.get("status") != "not run",
        )


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else 0.0


@dataclass
class VerifyReport:
    """What :func:`rocketstore.spark.verify` found.

    Attributes:
        root: the directory verified.
        checks: check name -> :class:`Check` (see :data:`CHECKS`), in a fixed order.
        stores: one dict per store: ``name``, ``path``, ``messages``, ``bytes``, ``files``,
            ``min_offset``, ``max_offset``.
        queues: one dict per (store, topic, queue): ``store``, ``topic``, ``queue_id``,
            ``messages``, ``min_offset``, ``max_offset``.
        messages: records found in all stores.
        source_rows: rows of the ``expected`` DataFrame (``None`` without one).
        seconds: wall time of the verification.
    """

    root: str
    checks: dict[str, Check]
    stores: list[dict[str, Any]] = field(default_factory=list)
    queues: list[dict[str, Any]] = field(default_factory=list)
    messages: int = 0
    source_rows: int | None = None
    seconds: float = 0.0
    spark: SparkSession | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True if every check passed."""
        return all(c.passed for c in self.checks.values())

    @property
    def failed_checks(self) -> list[str]:
        """Names of the checks that failed."""
        return [name for name, c in self.checks.items() if not c.passed]

    @property
    def messages_per_second(self) -> float:
        """Records verified per second of wall time."""
        return _rate(self.messages, self.seconds)

    def to_dict(self) -> dict[str, Any]:
        """Everything in the report as JSON-ready data."""
        return {
            "root": self.root,
            "ok": self.ok,
            "messages": self.messages,
            "source_rows": self.source_rows,
            "seconds": round(self.seconds, 3),
            "messages_per_second": round(self.messages_per_second, 1),
            "checks": {name: c.to_dict() for name, c in self.checks.items()},
            "stores": self.stores,
            "queues": self.queues,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VerifyReport:
        """Rebuilds a report from :meth:`to_dict` output (e.g. a JSON file)."""
        return cls(
            root=str(data["root"]),
            checks={k: Check.from_dict(v) for k, v in data["checks"].items()},
            stores=list(data.get("stores", [])),
            queues=list(data.get("queues", [])),
            messages=int(data.get("messages", 0)),
            source_rows=data.get("source_rows"),
            seconds=float(data.get("seconds", 0.0)),
        )

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent)

    @property
    def df(self) -> DataFrame:
        """The checks as a Spark DataFrame: name, status, passed, checked, failed, skipped,
        examples, notes, description (needs the session the report was made with)."""
        spark = self.spark
        if spark is None:
            from pyspark.sql import SparkSession

            spark = SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError("VerifyReport.df needs an active SparkSession")
        rows = [
            (
                c.name,
                c.status,
                c.passed,
                c.checked,
                c.failed,
                c.skipped,
                list(c.examples),
                list(c.notes),
                c.description,
            )
            for c in self.checks.values()
        ]
        schema = (
            "name string, status string, passed boolean, checked long, failed long, "
            "skipped long, examples array<string>, notes array<string>, description string"
        )
        return spark.createDataFrame(rows, schema)

    # ---- text ---------------------------------------------------------------------------

    def format(self, *, examples: int = 3) -> str:
        """A human-readable table: one line per check, then examples of failures."""
        width = max(len(n) for n in self.checks) if self.checks else 5
        lines = [
            f"verification of {self.root}: {len(self.stores)} store(s), "
            f"{self.messages:,} messages"
            + (f", source {self.source_rows:,} rows" if self.source_rows is not None else "")
            + f", {self.seconds:.1f} s ({self.messages_per_second:,.0f} msg/s)",
            f"  {'check'.ljust(width)}  {'status':<8} {'checked':>12} {'failed':>9}  notes",
        ]
        for name, c in self.checks.items():
            mark = {"passed": "ok", "FAILED": "FAILED", "not run": "-"}[c.status]
            extra = "; ".join(c.notes)
            if c.skipped:
                extra = f"{c.skipped:,} undecided" + (f"; {extra}" if extra else "")
            line = f"  {name.ljust(width)}  {mark:<8} {c.checked:>12,} {c.failed:>9,}  {extra}"
            lines.append(line.rstrip())
        for name, c in self.checks.items():
            if c.failed and c.examples:
                lines.append(f"  {name} failures (first {min(examples, len(c.examples))}):")
                lines.extend(f"    - {e}" for e in c.examples[:examples])
        lines.append("result: " + ("ALL CHECKS PASSED" if self.ok else "VERIFICATION FAILED"))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    # ---- files --------------------------------------------------------------------------

    def write(self, path: str | os.PathLike[str], *, plot: bool = True) -> list[Path]:
        """Writes the report as JSON and (with ``plot``) a PNG of messages per store and queue.

        ``path`` is the JSON file (``report.json`` -> also ``report.png``) or a directory
        (``verify-report.json`` and ``verify-report.png`` inside it). Returns the files
        written. The plot needs matplotlib (part of ``rocketstore[spark]``); without it only
        the JSON is written, a plot left by an earlier run is removed (it would describe
        other data), and the ``rocketstore`` command says so.
        """
        target = Path(path)
        if target.suffix.lower() != ".json":
            target = target / "verify-report.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(self.to_json() + "\n", encoding="utf-8")
        os.replace(tmp, target)
        written = [target]
        if plot:
            png = target.with_suffix(".png")
            if self.plot(png):
                written.append(png)
            else:
                png.unlink(missing_ok=True)
        return written

    def plot(self, path: str | os.PathLike[str]) -> bool:
        """Draws messages per store (stacked by topic) and per queue into a PNG.

        Returns False (and writes nothing) if matplotlib is not installed.
        """
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return False

        stores = [s["name"] for s in self.stores]
        topics = sorted({q["topic"] for q in self.queues})
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
        bottom = [0] * len(stores)
        for topic in topics:
            heights = [
                sum(q["messages"] for q in self.queues if q["store"] == s and q["topic"] == topic)
                for s in stores
            ]
            ax1.bar(stores, heights, bottom=bottom, label=topic)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax1.set_title("messages per store (by topic)")
        ax1.set_ylabel("messages")
        ax1.tick_params(axis="x", labelrotation=45)
        if topics:
            ax1.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))

        queues = sorted(self.queues, key=lambda q: (q["store"], q["topic"], q["queue_id"]))
        colors = {s: f"C{i % 10}" for i, s in enumerate(stores)}
        ax2.bar(
            range(len(queues)),
            [q["messages"] for q in queues],
            color=[colors.get(q["store"], "C0") for q in queues],
        )
        ax2.set_title("messages per queue (colour = store)")
        ax2.set_xlabel("queue (store, topic, queue id)")
        ax2.set_ylabel("messages")
        ax2.set_xticks([])
        status = "all checks passed" if self.ok else "FAILED: " + ", ".join(self.failed_checks)
        fig.suptitle(f"rocketstore verify {os.path.basename(self.root) or self.root}: {status}")
        fig.tight_layout()
        fig.savefig(os.fspath(path), dpi=80)
        plt.close(fig)
        return True
