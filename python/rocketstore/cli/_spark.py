"""The Spark half of the ``rocketstore`` command: ``demo``, ``ingest`` and ``verify``.

Imported only when one of them runs, so that ``rocketstore inspect``/``dump`` start without
importing PySpark. Each command makes (or reuses) a SparkSession, shows one progress bar per
step (Spark tasks done / known), and prints a summary.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketstore._stores import MANIFEST, is_store
from rocketstore.cli._demo import demo_geometry, fmt_per_second
from rocketstore.cli._errors import EXIT_USAGE, CliError
from rocketstore.cli._progress import SparkProgress
from rocketstore.cli._tools import cmd_verify_local, print_verify, report_files_line
from rocketstore.spark._demo import demo_messages
from rocketstore.spark._ingest import PUT_COLUMNS, ingest
from rocketstore.spark.verify import verify

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


__all__ = ["cmd_demo", "cmd_ingest", "cmd_verify", "read_input", "session"]

_LOG4J = "rootLogger.level = error\nrootLogger.appenderRef.stdout.ref = console\n" + (
    "appender.console.type = Console\nappender.console.name = console\n"
    "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
    "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex\n"
)


# --------------------------------------------------------------------------------------
# Session
# --------------------------------------------------------------------------------------


@contextmanager
def session(master: str, app: str, *, conf: list[str] | None = None) -> Iterator[SparkSession]:
    """A SparkSession for one command; stopped at the end unless it already existed.

    Local masters (``local[*]``, ``local-cluster[...]``) bind to 127.0.0.1, run the Python
    workers with this interpreter and turn the web UI off. ``conf`` holds ``KEY=VALUE``
    Spark settings given with ``--conf``.
    """
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    if existing is not None:
        yield existing
        return
    local = master.startswith("local")
    conf_dir: str | None = None
    if local:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if master.startswith("local-cluster") and "SPARK_HOME" not in os.environ:
        import pyspark

        os.environ["SPARK_HOME"] = os.path.dirname(pyspark.__file__)
    if "SPARK_CONF_DIR" not in os.environ:
        # Spark's default logging prints every WARN line; the command prints its own report.
        conf_dir = tempfile.mkdtemp(prefix="rocketstore-spark-conf-")
        Path(conf_dir, "log4j2.properties").write_text(_LOG4J)
        os.environ["SPARK_CONF_DIR"] = conf_dir
    from rocketstore.spark._jvm import jvm_reader_conf

    builder = SparkSession.builder
    user_jars = next(
        (v for k, _, v in (c.partition("=") for c in conf or []) if k == "spark.jars"), None
    )
    for key, value in jvm_reader_conf(user_jars).items():  # the JVM reader, when it was built
        builder = builder.config(key, value)
    builder = (
        builder.master(master)
        .appName(app)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    if local:
        cores = os.cpu_count() or 2
        builder = (
            builder.config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", str(max(4, 2 * cores)))
            .config("spark.driver.memory", "2g")
        )
    for item in conf or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--conf expects KEY=VALUE, got {item!r}", EXIT_USAGE)
        if key == "spark.jars" and user_jars is not None and jvm_reader_conf():
            continue  # already joined with the JVM reader's jar above
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        yield spark
    finally:
        spark.stop()
        if conf_dir is not None:
            os.environ.pop("SPARK_CONF_DIR", None)
            shutil.rmtree(conf_dir, ignore_errors=True)


# --------------------------------------------------------------------------------------
# Input files
# --------------------------------------------------------------------------------------


def _input_format(path: str, fmt: str | None) -> str:
    if fmt:
        return fmt
    name = path.rstrip("/").lower()
    for suffix, kind in (
        (".parquet", "parquet"),
        (".json", "json"),
        (".jsonl", "json"),
        (".ndjson", "json"),
        (".csv", "csv"),
    ):
        if name.endswith(suffix):
            return kind
    if os.path.isdir(path):
        for entry in sorted(os.listdir(path)):
            if not entry.startswith(("_", ".")):
                return _input_format(entry, None) if "." in entry else "parquet"
    raise CliError(
        f"cannot tell the format of {path}; pass --format parquet, json or csv", EXIT_USAGE
    )


def read_input(spark: SparkSession, path: str, fmt: str | None = None) -> DataFrame:
    """Reads a Parquet, JSON (lines) or CSV (with a header) file or directory of messages.

    Columns named like ``put``'s arguments are kept (``topic`` and ``body`` required) and
    cast where the file format cannot say: CSV ``queue_id``/``flag`` to int and
    ``born_timestamp`` to a timestamp (or epoch ms), a JSON ``properties`` object to a
    map<string, string>. Other columns are dropped with a note on stderr.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, MapType, StringType, StructType

    kind = _input_format(path, fmt)
    reader = spark.read.format(kind)
    if kind == "csv":
        reader = reader.option("header", "true").option("multiLine", "true").option("escape", '"')
    df = reader.load(path)
    extra = [c for c in df.columns if c not in PUT_COLUMNS]
    if extra:
        print(
            f"rocketstore: ignoring input columns {', '.join(extra)} (not put() arguments)",
            file=sys.stderr,
        )
    missing = [c for c in ("topic", "body") if c not in df.columns]
    if missing:
        raise CliError(
            f"{path} has no {' or '.join(missing)} column (columns: "
            f"{', '.join(df.columns)}); messages need at least topic and body",
            EXIT_USAGE,
        )
    cols = []
    for name in (c for c in PUT_COLUMNS if c in df.columns):
        col = F.col(name)
        dtype = df.schema[name].dataType
        if name in ("queue_id", "flag", "delay_level") and not isinstance(dtype, (LongType,)):
            col = col.cast("int")
        elif name == "born_timestamp" and isinstance(dtype, StringType):
            col = F.when(col.rlike("^[0-9]+$"), F.timestamp_millis(col.cast("long"))).otherwise(
                col.cast("timestamp")
            )
        elif name == "properties" and isinstance(dtype, StructType):
            col = F.from_json(F.to_json(col), MapType(StringType(), StringType()))
        elif name == "properties" and isinstance(dtype, StringType):
            col = F.from_json(col, MapType(StringType(), StringType()))
        elif name == "body" and not isinstance(dtype, StringType):
            col = col.cast("binary")
        cols.append(col.alias(name))
    return df.select(*cols)


# --------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} GB"


def _print_ingest(summary: dict[str, Any], file: Any = None) -> None:
    print(
        f"ingest: {summary['messages']:,} messages ({_fmt_bytes(summary['bytes'])} of commit "
        f"log) into {len(summary['stores'])} store(s) in {summary['seconds']:.1f} s = "
        f"{fmt_per_second(summary['messages_per_second'])} msg/s, "
        f"{fmt_per_second(summary['mb_per_second'])} MB/s",
        file=file,
    )


def _options(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"-c/--config expects KEY=VALUE, got {item!r}", EXIT_USAGE)
        out[key.strip()] = value
    return out


def _store_config(items: list[str]) -> dict[str, int | bool | str]:
    """``-c KEY=VALUE`` items as typed store configuration keywords (snake_case)."""
    from rocketstore.spark._options import split_options

    _, config = split_options(_options(items), (), what="verify")
    return config


def _fs_settings(items: list[str]) -> dict[str, str]:
    """The file system settings among ``-c KEY=VALUE`` items (``fs.s3a.endpoint=...``)."""
    from rocketstore._remote import split_settings

    return split_settings(_options(items))[0]


#: Messages of the demo's untimed warm-up run (at most; 2 % of a smaller demo, at least 1,000).
_WARM_UP = 20_000


def _warm_up(spark: SparkSession, n: int, stores: int, queues: int) -> float:
    """An untimed ingest and verify of ``n`` messages in a temporary directory; its seconds.

    The first Spark jobs of a session also start the Python workers (each imports pyarrow and
    rocketstore) and compile the JVM's generated code; the demo's throughput figures are
    measured after that.
    """
    t0 = time.perf_counter()
    geometry = demo_geometry(n, stores)
    with tempfile.TemporaryDirectory(prefix="rocketstore-warm-up-") as tmp:
        df = demo_messages(spark, n, queues=queues, stores=stores)
        root = Path(tmp) / "root"
        ingest(
            df,
            root,
            stores=stores,
            partitioned=True,
            mode="overwrite",
            mapped_file_size_commit_log=4 * 1024 * 1024,
            **geometry,
        )
        verify(spark, root, expected=df, **geometry)
    return time.perf_counter() - t0


def cmd_demo(args: argparse.Namespace) -> int:
    """``rocketstore demo``: generate, ingest into N stores, verify against the source."""
    root = Path(args.store)
    show = not args.quiet
    if is_store(root):  # a store from the non-Spark demo: replace it
        shutil.rmtree(root)
    elif root.exists() and not (
        root.is_dir() and (not any(root.iterdir()) or (root / MANIFEST).is_file())
    ):
        raise CliError(
            f"{root} exists and is not a demo store directory (no "
            "_SUCCESS manifest); choose another --store or remove it yourself",
            EXIT_USAGE,
        )
    n = args.messages
    as_json = bool(getattr(args, "json", False))
    # With --json, stdout carries only the JSON summary; the running commentary goes to stderr.
    say = sys.stderr if as_json else sys.stdout
    print(
        f"rocketstore demo: {n:,} generated messages (5 topics x {args.queues} queues, tags, "
        f"keys, JSON bodies of mixed size) -> {root}/ as {args.stores} stores, Spark "
        f"{args.master}",
        file=say,
    )
    file_size = args.file_size or 64 * 1024 * 1024
    geometry = demo_geometry(n, args.stores)  # small index and consume queue files
    with session(args.master, "rocketstore-demo", conf=args.conf) as spark:
        warm = min(_WARM_UP, max(1_000, n // 50))
        seconds = _warm_up(spark, warm, args.stores, args.queues)
        # Generated one partition per store (whole queues), so the ingest needs no shuffle.
        df = demo_messages(spark, n, queues=args.queues, stores=args.stores)
        # Spark inlines the row count into the generated code of the rows' `range` stage, so
        # the smaller warm-up compiled other classes: one untimed pass of these very rows
        # through Spark's no-op sink has the JVM compile the code the timed jobs run.
        t0 = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        generated = time.perf_counter() - t0
        print(
            f"warm-up (not timed): {warm:,} messages ingested and verified in "
            f"{seconds:.1f} s, then the {n:,} generated messages once through Spark's no-op "
            f"sink in {generated:.1f} s (starts the Python workers, compiles the JVM's code)",
            file=say,
        )
        with SparkProgress(spark, "ingest", enabled=show):
            summary = ingest(
                df,
                root,
                stores=args.stores,
                partitioned=True,
                mode="overwrite",
                mapped_file_size_commit_log=file_size,
                **geometry,
            )
        _print_ingest(summary, file=say)
        report_path = Path(args.report) if args.report else root / "_report" / "verify.json"
        with SparkProgress(spark, "verify", enabled=show):
            report = verify(
                spark,
                root,
                expected=df,
                sample_keys=args.sample_keys,
                report_path=report_path,
                **geometry,
            )
    png = report_path.with_suffix(".png")
    if as_json:
        import json

        files = [str(report_path)] + ([str(png)] if png.exists() else [])
        print(
            json.dumps(
                {
                    "ok": report.ok,
                    "ingest": summary,
                    "verify": json.loads(report.to_json()),
                    "report_files": files,
                }
            )
        )
        return 0 if report.ok else 1
    print(report.format())
    print(
        f"\nthroughput: ingest {fmt_per_second(summary['messages_per_second'])} msg/s "
        f"({fmt_per_second(summary['mb_per_second'])} MB/s), verify "
        f"{fmt_per_second(report.messages_per_second)} "
        f"msg/s (every check above, including the comparison with the source); each from "
        "the job's start to its end, with data generation, after the warm-up"
    )
    print(report_files_line(report_path))
    return 0 if report.ok else 1


def cmd_ingest(args: argparse.Namespace) -> int:
    """``rocketstore ingest``: a Parquet/JSON/CSV input into N stores."""
    from rocketstore._remote import resolve_root

    resolve_root(args.store)  # an unsupported scheme: refused before Spark starts
    t0 = time.perf_counter()
    options: dict[str, Any] = _options(args.config)  # writer options, as strings
    with session(args.master, "rocketstore-ingest", conf=args.conf) as spark:
        df = read_input(spark, args.input, args.format)
        with SparkProgress(spark, "ingest", enabled=not args.quiet):
            summary = ingest(
                df,
                args.store,
                stores=args.stores,
                mode=args.mode,
                order_by=args.order_by,
                **options,
            )
    _print_ingest(summary)
    print(
        f"stores: {', '.join(summary['stores']) or '(none: the input is empty)'} under "
        f"{summary['root']} (total {time.perf_counter() - t0:.1f} s with Spark start-up)"
    )
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """``rocketstore verify``: every check; exit status 1 if one fails."""
    from rocketstore._remote import resolve_root

    resolve_root(args.root)  # an unsupported scheme: refused before Spark starts
    if getattr(args, "no_spark", False):
        return cmd_verify_local(args)
    with session(args.master, "rocketstore-verify", conf=args.conf) as spark:
        expected = None
        if args.expected:
            expected = read_input(spark, args.expected, args.expected_format)
        with SparkProgress(spark, "verify", enabled=not args.quiet):
            report = verify(
                spark,
                args.root,
                expected=expected,
                sample_keys=args.sample_keys,
                report_path=args.report,
                **_store_config(args.config),
                **_fs_settings(args.config),
            )
    return print_verify(args, report)
