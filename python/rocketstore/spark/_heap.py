"""The Python worker's heap as the ``rocketstore`` data source's tasks leave it.

PySpark's worker daemon runs a full ``gc.collect()`` after every task of a reused worker. A
worker that imported pyspark, pyarrow and rocketstore holds some 75,000 objects that live as
long as the process, and each of those collections walks all of them (about 20 ms in a quiet
process, several times that on a busy machine): per task of 125,000 rows, 100-300 ns per row,
and about a fifth of a read worker's CPU in a perf profile.

:func:`freeze_worker_heap` runs once per process at the start of the first read or write task:
one collection (so that no garbage is kept), then ``gc.freeze()``, which moves every object
the process has so far into the permanent generation that later collections skip. Objects
created after it are collected as usual. ``gc.unfreeze()`` undoes it.

Example::

    from rocketstore.spark._heap import freeze_worker_heap

    freeze_worker_heap()  # once per process; later calls return at once
"""

from __future__ import annotations

import gc

__all__ = ["freeze_worker_heap"]

_state = {"frozen": False}


def freeze_worker_heap() -> None:
    """Collects once and freezes the objects this process has (once per process)."""
    if _state["frozen"]:
        return
    _state["frozen"] = True
    gc.collect()
    gc.freeze()


def _reset() -> None:
    """Unfreezes and lets the next call freeze again (benchmarks' same-session baselines)."""
    _state["frozen"] = False
    gc.unfreeze()
