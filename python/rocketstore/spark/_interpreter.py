"""Which Python interpreter runs the Spark workers, and a clear error when it lacks rocketstore.

PySpark starts every Python worker, including the ones the driver's JVM starts to plan a
Python data source (``schema()``, ``reader()``, ``writer()``), with the interpreter named by
``SparkContext.pythonExec``: the ``PYSPARK_PYTHON`` environment variable of the driver process
when the SparkContext started, else ``python3`` from ``PATH``. ``spark-submit --conf
spark.pyspark.python=...`` works by setting ``PYSPARK_PYTHON`` for the driver process; set on
the builder of a script started with ``python``, ``spark.pyspark.python`` changes nothing.

So a script run by a virtualenv's interpreter without activating it (``.venv/bin/python job.py``,
as cron, systemd and IDEs do) gets workers that run some other ``python3``, which cannot
unpickle the ``rocketstore`` data source. Two things here prevent that:

* :func:`default_worker_python` (called by ``import rocketstore.spark``) sets
  ``PYSPARK_PYTHON`` to this interpreter when it is unset and this process is about to start
  Spark itself (no SparkContext yet, not started by ``spark-submit``). A value the user set is
  never changed.
* :func:`checked_source` (called by :func:`rocketstore.spark.register`) asks the interpreter
  of an already running context whether it can import this rocketstore; if not, it returns a
  stand-in source whose ``schema()``, ``reader()`` and ``writer()`` fail, on the driver and
  before any task, with an error that names that interpreter and what to set.

Example::

    import rocketstore.spark  # before the SparkSession: workers run this interpreter

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    spark.read.format("rocketstore").load("/data/stores").count()
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource

__all__ = ["checked_source", "default_worker_python", "unavailable_source", "worker_python_problem"]

_log = logging.getLogger(__name__)

#: Seconds the probe interpreter may take to import rocketstore (and pyarrow) before the check
#: gives up and lets Spark run (a slow file system is not a broken installation).
PROBE_TIMEOUT = 120.0

_PROBE = """\
import json, sys
out = {"python": "%d.%d" % sys.version_info[:2], "executable": sys.executable}
try:
    import rocketstore
    out["rocketstore"] = rocketstore.__version__
    out["location"] = rocketstore.__file__
except Exception as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""


def default_worker_python() -> bool:
    """Makes Spark's Python workers run this interpreter unless something else was chosen.

    Sets ``PYSPARK_PYTHON`` to ``sys.executable`` when ``PYSPARK_PYTHON`` is unset, no
    SparkContext runs in this process yet, and the process was not started by
    ``spark-submit``/``pyspark`` (whose ``spark.pyspark.python``/``PYSPARK_PYTHON`` settings,
    or their absence on a cluster, are left alone). Returns whether it set the variable.

    Example::

        from rocketstore.spark._interpreter import default_worker_python

        default_worker_python()  # before SparkSession.builder.getOrCreate()
    """
    if os.environ.get("PYSPARK_PYTHON") or not sys.executable:
        return False
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # the JVM started this process: its choice rules
        return False
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:  # too late: pythonExec is fixed
        return False
    os.environ["PYSPARK_PYTHON"] = sys.executable
    return True


def _resolve(command: str, path: str | None) -> str | None:
    """The file PySpark would execute for ``command`` (a name on PATH or a path), or None."""
    found = shutil.which(command, path=path)
    return os.path.abspath(found) if found else None


@functools.lru_cache(maxsize=16)
def _probe(executable: str, cwd: str, pythonpath: str | None) -> dict[str, Any] | None:
    """What ``executable`` reports about its rocketstore, or None if it could not be asked."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    try:
        proc = subprocess.run(
            [executable, "-c", _PROBE],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
        last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        report = json.loads(last) if last.startswith("{") else None
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        _log.debug("could not ask %s about rocketstore: %s", executable, exc)
        return None
    if not isinstance(report, dict):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit status {proc.returncode}: {tail[0]}"}
    return report


def worker_python_problem(spark: SparkSession) -> str | None:
    """Why ``spark``'s Python workers cannot run the rocketstore data source, or None.

    Compares the interpreter the running SparkContext starts its workers with
    (``pythonExec``) to this one; when it is another file, runs it once (cached) to ask
    whether it imports rocketstore, of the same version, on the same Python minor version.
    Sessions without a local SparkContext (Spark Connect) are not checked.

    Example::

        from rocketstore.spark._interpreter import worker_python_problem

        problem = worker_python_problem(spark)
        if problem:
            print(problem)
    """
    from pyspark import SparkContext

    import rocketstore

    sc = getattr(spark, "_sc", None) or SparkContext._active_spark_context
    command = getattr(sc, "pythonExec", None)
    if not isinstance(command, str) or not command:
        return None
    here = os.path.abspath(sys.executable) if sys.executable else None
    resolved = _resolve(command, os.environ.get("PATH"))
    if resolved is not None and resolved == here:
        return None
    env_value = os.environ.get("PYSPARK_PYTHON")
    if env_value == command:
        how = "set by PYSPARK_PYTHON"
    elif not env_value and command == "python3":
        how = "PySpark's default, PYSPARK_PYTHON being unset"
    else:
        how = "PYSPARK_PYTHON when the context started"
    ours = "{}.{}".format(*sys.version_info[:2])
    if resolved is None:
        what = f"{command} ({how}), which is not an executable file (from {os.getcwd()})"
    else:
        environment = getattr(sc, "environment", None) or {}
        pythonpath = environment.get("PYTHONPATH") or os.environ.get("PYTHONPATH")
        report = _probe(resolved, os.getcwd(), pythonpath)
        if report is None:
            return None  # could not ask: let Spark try rather than block a working setup
        if "error" in report:
            why = f"cannot import rocketstore ({report['error']})"
        elif report.get("python") != ours:
            why = f"is Python {report.get('python')}, the driver Python {ours}"
        elif report.get("rocketstore") != rocketstore.__version__:
            why = (
                f"imports rocketstore {report.get('rocketstore')} from "
                f"{report.get('location')}, the driver {rocketstore.__version__}"
            )
        else:
            return None
        shown = command if resolved == command else f"{resolved} ({command}, {how})"
        what = f"{shown}, which {why}" if resolved != command else f"{shown} ({how}), which {why}"
    message = (
        f"rocketstore: this SparkContext's Python workers run {what}. Set "
        f"PYSPARK_PYTHON={sys.executable} (the driver's interpreter; or another Python {ours} "
        f"with rocketstore {rocketstore.__version__}) before the SparkContext starts, or "
        "`import rocketstore.spark` before creating the SparkSession, which does that; with "
        "spark-submit, --conf spark.pyspark.python=<that interpreter>."
    )
    conf = sc.getConf().get("spark.pyspark.python") if sc is not None else None
    if conf and conf != command:
        message += f" (spark.pyspark.python={conf} is set, but only spark-submit reads it.)"
    return message


def unavailable_source(message: str) -> type[DataSource]:
    """A ``rocketstore`` data source whose every use fails with ``RuntimeError(message)``.

    Its class and methods are pickled by value (they are not importable by name), so
    PySpark's planning worker on the driver unpickles and runs them in any interpreter that
    has PySpark, even one without rocketstore: ``schema()``, ``reader()``, ``writer()`` and
    the stream methods raise there, before any task is scheduled.

    Example::

        from rocketstore.spark._interpreter import unavailable_source

        spark.dataSource.register(unavailable_source("rocketstore: set PYSPARK_PYTHON"))
    """
    from pyspark.sql.datasource import DataSource

    def fail(self: object, *args: object, **kwargs: object) -> Any:
        raise RuntimeError(message)

    def name(cls: type) -> str:
        return "rocketstore"

    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": "unavailable_source.<locals>.RocketStoreDataSource",
        "__doc__": message,
        "name": classmethod(name),
        "schema": fail,
        "reader": fail,
        "writer": fail,
        "streamReader": fail,
        "simpleStreamReader": fail,
        "streamWriter": fail,
    }
    return type("RocketStoreDataSource", (DataSource,), namespace)


def checked_source(spark: SparkSession, source: type[DataSource]) -> type[DataSource]:
    """``source``, or :func:`unavailable_source` when ``spark``'s workers cannot run it.

    Example::

        from rocketstore.spark import RocketStoreDataSource
        from rocketstore.spark._interpreter import checked_source

        spark.dataSource.register(checked_source(spark, RocketStoreDataSource))
    """
    problem = worker_python_problem(spark)
    if problem is None:
        return source
    _log.warning("%s", problem)
    return unavailable_source(problem)
