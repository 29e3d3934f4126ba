"""Progress bars of the ``rocketstore`` command, on stderr: tqdm when it is installed.

:class:`Progress` counts units the command itself handles (messages put or scanned);
:class:`SparkProgress` counts the Spark tasks of the jobs started inside its ``with`` block.
Bars are drawn only when stderr is a terminal: a log file or a pipe gets no ``\r`` lines.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import uuid
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Progress", "SparkProgress", "on_terminal"]


def on_terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default: stderr) is a terminal, where a bar redrawn with ``\r``
    belongs."""
    stream = sys.stderr if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


class Progress:
    """A progress bar over ``total`` units; tqdm if available, else a plain stderr bar. Drawn
    only when enabled and stderr is a terminal."""

    def __init__(self, total: int, desc: str, unit: str = "msg", enabled: bool = True) -> None:
        self.total = total
        self.desc = desc
        self.unit = unit
        self.done = 0
        self._stream: TextIO = sys.stderr
        self.enabled = enabled and on_terminal(self._stream)
        self.start = time.perf_counter()
        self._tqdm: Any = None
        if not self.enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            self._draw()
        else:
            self._tqdm = tqdm(
                total=total, desc=desc, unit=unit, unit_scale=True, file=self._stream, leave=True
            )

    def update(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.update(n)
        else:
            self._draw()

    def _draw(self) -> None:
        width = 30
        frac = self.done / self.total if self.total else 1.0
        filled = int(width * frac)
        elapsed = time.perf_counter() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        self._stream.write(
            f"\r{self.desc}: [{'#' * filled}{'.' * (width - filled)}] "
            f"{self.done:,}/{self.total:,} {self.unit} ({rate / 1e6:.2f} M {self.unit}/s)"
        )
        self._stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.close()
        else:
            self._stream.write("\n")
            self._stream.flush()


class SparkProgress:
    """A tqdm bar of the Spark tasks of the jobs started inside the ``with`` block.

    Jobs are tagged with a job group; a thread polls ``statusTracker()`` twice a second and
    shows completed / known tasks over all their stages. Disabled (no output) with
    ``enabled=False`` or without tqdm.

    Example::

        with SparkProgress(spark, "ingest"):
            df.write.format("rocketstore").save(root)
    """

    def __init__(self, spark: SparkSession, desc: str, *, enabled: bool = True) -> None:
        self._sc = spark.sparkContext
        self._desc = desc
        self._group = f"rocketstore-{desc}-{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._bar: Any = None
        self._tqdm: Any = None
        self._thread: threading.Thread | None = None
        if enabled and on_terminal():
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self._tqdm = tqdm

    def _poll(self) -> None:
        tracker = self._sc.statusTracker()
        total = done = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    total += stage.numTasks
                    done += stage.numCompletedTasks
        if total == 0 or self._tqdm is None:
            return
        if self._bar is None:  # made on the first task, so no empty bar is ever drawn
            self._bar = self._tqdm(
                total=total, desc=f"{self._desc:<8}", unit=" tasks", file=sys.stderr, leave=True
            )
        if (total, done) != (self._bar.total, self._bar.n):
            self._bar.total = total
            self._bar.n = done
            self._bar.refresh()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self._poll()
            except Exception:  # the session may be stopping; progress is best effort
                return

    def __enter__(self) -> SparkProgress:
        self._sc.setJobGroup(self._group, self._desc)
        if self._tqdm is not None:
            self._thread = threading.Thread(
                target=self._run, name="rocketstore-progress", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if exc_type is None and self._tqdm is not None:
            with contextlib.suppress(Exception):  # best effort
                self._poll()
        if self._bar is not None:
            if exc_type is None:  # stages Spark skipped (shuffle output reused) count as done
                self._bar.n = self._bar.total
                self._bar.refresh()
            self._bar.close()
        self._sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        self._sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
