"""The ``rocketstore`` command's argument parser: one sub-parser per command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import rocketstore
from rocketstore.cli import _connector
from rocketstore.cli._demo import demo_local
from rocketstore.cli._errors import (
    EXIT_CODES_HELP,
    EXIT_DEPENDENCY,
    EXIT_IO,
    EXIT_USAGE,
    CliError,
)
from rocketstore.cli._tools import (
    cmd_bench,
    cmd_dump,
    cmd_inspect,
    cmd_rebuild_indexes,
    cmd_sweep,
    cmd_verify_local,
)

__all__ = ["build_parser"]

if TYPE_CHECKING:
    #: What ``add_subparsers`` returns: one ``add_parser`` per command.
    _Commands = argparse._SubParsersAction[argparse.ArgumentParser]


# --------------------------------------------------------------------------------------
# Spark commands (demo, ingest, verify): rocketstore/cli/_spark.py
# --------------------------------------------------------------------------------------


def _spark_command(name: str, args: argparse.Namespace) -> int:
    try:
        from rocketstore.cli import _spark
    except ImportError as e:
        alternative = {
            "demo": "; 'rocketstore demo --no-spark' runs the demo without Spark",
            "verify": "; 'rocketstore verify --no-spark' runs the per-store checks without it",
        }.get(args.command, "")
        raise CliError(
            f"needs PySpark ({e}): pip install 'rocketstore[spark]' (and Java 17+){alternative}",
            EXIT_DEPENDENCY,
        ) from e
    result: int = getattr(_spark, name)(args)
    return result


def cmd_demo(args: argparse.Namespace) -> int:
    """``rocketstore demo``: the Spark job, or the single-process demo with ``--no-spark``."""
    if args.no_spark:
        return demo_local(args)
    return _spark_command("cmd_demo", args)


def cmd_ingest(args: argparse.Namespace) -> int:
    return _spark_command("cmd_ingest", args)


def cmd_verify(args: argparse.Namespace) -> int:
    """``rocketstore verify``: with Spark, or the per-store checks in this process
    (``--no-spark``, which needs no PySpark)."""
    if args.no_spark:
        return cmd_verify_local(args)
    return _spark_command("cmd_verify", args)


# --------------------------------------------------------------------------------------
# The parser
# --------------------------------------------------------------------------------------


def _positive(text: str) -> int:
    value = int(text.replace("_", "").replace(",", ""))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps one-paragraph descriptions; keeps text with line breaks (examples) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _config_arguments(p: argparse.ArgumentParser, help: str) -> None:
    """``-c/--config KEY=VALUE`` (repeatable), the store settings of every command;
    ``-o/--option`` is a hidden alias (older spelling of ``ingest`` and ``verify``)."""
    p.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=help,
    )
    p.add_argument("-o", "--option", action="append", dest="config", help=argparse.SUPPRESS)


def _spark_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--master",
        default="local[*]",
        help="Spark master URL (default: local[*], every core of this machine; e.g. "
        "local-cluster[2,1,1024] or spark://host:7077)",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, e.g. --conf spark.driver.memory=4g (repeatable)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


_EXAMPLES = (
    """\
A store is a directory in Apache RocketMQ's on-disk format (commitlog/, consumequeue/,
index/, checkpoint). The Spark commands write and check directories of stores, one store
per Spark task, described by a _SUCCESS manifest.

examples:
  rocketstore demo                        generate 1,000,000 messages, ingest them with Spark
                                          into ./demo-store (4 stores), verify, print a report
  rocketstore demo --messages 100_000     a smaller run
  rocketstore demo --no-spark             the quick demo without Spark (one store, put_batch)
  rocketstore ingest --input msgs.parquet --store /data/stores --stores 8
                                          write Parquet/JSON/CSV rows (columns named like
                                          put()'s arguments: topic, body, queue_id, tags, keys)
  rocketstore verify /data/stores --expected msgs.parquet --report verify.json
                                          check everything; exit status 1 if a check fails
  rocketstore inspect ./demo-store        what is in a store or directory of stores
  rocketstore dump ./demo-store --topic orders --queue 0 --from 0 --max 5
                                          print messages of one queue
  rocketstore rebuild-indexes ./my-store  rebuild consume queues and index files
  rocketstore sweep s3a://bucket/stores   list the objects of a remote root no reader reads
                                          (--delete removes those older than --min-age)
  rocketstore bench                       figures against file/mmap/SQLite baselines

Run 'rocketstore COMMAND --help' for the options of a command. The Spark commands (demo,
ingest, verify) need 'pip install rocketstore[spark]' and Java 17+ ('verify --no-spark' and
'demo --no-spark' do not). Store settings are given with -c/--config KEY=VALUE everywhere.

"""
    + EXIT_CODES_HELP
)


def _sizes(text: str) -> list[int]:
    """``"100,1024,4096"`` -> ``[100, 1024, 4096]`` (for ``bench --sizes``)."""
    try:
        sizes = [_positive(t) for t in text.split(",") if t.strip()]
    except (ValueError, argparse.ArgumentTypeError) as e:
        raise argparse.ArgumentTypeError(f"expected sizes like 100,1024,4096: {e}") from e
    if not sizes:
        raise argparse.ArgumentTypeError("expected at least one size")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rocketstore",
        description=(
            "rocketstore: a message store byte-compatible with Apache RocketMQ's on-disk store.\n"
            "This tool bulk-loads stores with Spark, verifies them, shows and dumps their\n"
            "contents, rebuilds their indexes and measures throughput."
        ),
        epilog=_EXAMPLES,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=rocketstore.__version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    _add_demo(sub)
    _add_ingest(sub)
    _add_verify(sub)
    _add_bench(sub)
    _add_inspect(sub)
    _add_dump(sub)
    _add_rebuild_indexes(sub)
    _add_sweep(sub)
    _add_spark_jar(sub)
    return parser


def _add_demo(sub: _Commands) -> None:
    demo = sub.add_parser(
        "demo",
        help="the main job on generated data: Spark ingest into 4 stores, then verify",
        description=(
            "Generates N realistic messages as a Spark DataFrame (5 topics, 8 queues each, "
            "tags, keys, properties, JSON bodies from 60 B to 4 KiB), ingests them with Spark "
            "into --stores stores under --store (replacing what the last demo wrote), "
            "verifies every store against the source DataFrame (CRCs, framing, consume "
            "queues, gaps, index lookups, manifest, equality) and prints the report with the "
            "ingest and verify throughput. The report is also written as JSON and PNG. "
            "Exit status 1 if a check fails. With --no-spark: the quick single-process demo "
            "(put_batch from an Arrow table into one store, read back with scan)."
        ),
        epilog=(
            "examples:\n"
            "  rocketstore demo\n"
            "  rocketstore demo --messages 200_000 --stores 2 --master 'local[2]'\n"
            "  rocketstore demo --no-spark --body-size 1024"
        ),
        formatter_class=_HelpFormatter,
    )
    demo.add_argument(
        "--store",
        default="./demo-store",
        help="directory for the stores (default: ./demo-store)",
    )
    demo.add_argument(
        "--no-spark",
        action="store_true",
        help="run the quick demo without Spark: one store, put_batch, scan",
    )
    demo.add_argument(
        "--stores", type=_positive, default=4, help="number of stores (Spark demo; default: 4)"
    )
    demo.add_argument(
        "--report",
        metavar="PATH",
        help="report JSON (a PNG is written next to it; default: STORE/_report/verify.json)",
    )
    demo.add_argument(
        "--sample-keys",
        type=_positive,
        metavar="N",
        help="look up only N evenly spread keyed messages per store in the index "
        "(default: every key)",
    )
    demo.add_argument(
        "--messages",
        type=_positive,
        default=1_000_000,
        metavar="N",
        help="number of messages (default: 1,000,000)",
    )
    demo.add_argument(
        "--body-size",
        type=_positive,
        metavar="BYTES",
        help="--no-spark: body size (default: 100)",
    )
    demo.add_argument("--topics", type=_positive, default=4, help="--no-spark: default: 4")
    demo.add_argument("--queues", type=_positive, default=8, help="queues per topic; default: 8")
    demo.add_argument(
        "--batch-size",
        type=_positive,
        default=100_000,
        metavar="N",
        help="--no-spark: rows per put_batch call (default: 100,000)",
    )
    demo.add_argument(
        "--file-size",
        type=_positive,
        metavar="BYTES",
        help="commit log file size (default: 64 MiB with Spark, RocketMQ's 1 GiB without)",
    )
    demo.add_argument(
        "--json",
        action="store_true",
        help="print the summary as one JSON object on stdout (the commentary goes to stderr)",
    )
    _spark_arguments(demo)
    demo.set_defaults(func=cmd_demo)


def _add_ingest(sub: _Commands) -> None:
    ingest = sub.add_parser(
        "ingest",
        help="write a Parquet/JSON/CSV file of messages into N stores with Spark",
        description=(
            "Reads messages from --input (Parquet, JSON lines or CSV with a header; a file "
            "or a directory) and writes them with Spark into --stores new stores under "
            "--store, one Spark task per store, published with a _SUCCESS manifest. Columns "
            "are put()'s argument names: topic and body are required; queue_id, tags, keys "
            "(space-separated), properties, born_timestamp, flag, born_host, store_host are "
            "optional; other columns are ignored. Rows with a queue_id keep it, and each "
            "queue lands in one store."
        ),
        epilog=(
            "examples:\n"
            "  rocketstore ingest --input orders.parquet --store /data/stores\n"
            "  rocketstore ingest --input events/ --format json --store /data/stores \\\n"
            "      --stores 16 --mode overwrite -c mapped_file_size_commit_log=268435456"
        ),
        formatter_class=_HelpFormatter,
    )
    ingest.add_argument("--input", required=True, metavar="PATH", help="file or directory")
    ingest.add_argument(
        "--format",
        choices=("parquet", "json", "csv"),
        help="input format (default: from the file name)",
    )
    ingest.add_argument(
        "--store", required=True, metavar="ROOT", help="directory to write the stores into"
    )
    ingest.add_argument(
        "--stores", type=_positive, default=4, help="number of stores to write (default: 4)"
    )
    ingest.add_argument(
        "--mode",
        choices=("append", "overwrite"),
        default="append",
        help="append: add stores next to existing ones (default); overwrite: replace them",
    )
    ingest.add_argument(
        "--order-by",
        action="append",
        metavar="COLUMN",
        help="sort each store's messages by this column first (repeatable)",
    )
    _config_arguments(
        ingest,
        "a store setting or writer option (queueSelector, queueNums, compressionType), e.g. "
        "-c mapped_file_size_commit_log=268435456 (repeatable)",
    )
    _spark_arguments(ingest)
    ingest.set_defaults(func=cmd_ingest)


def _add_verify(sub: _Commands) -> None:
    verify = sub.add_parser(
        "verify",
        help="check every store under ROOT (and, with --expected, against the source)",
        description=(
            "Checks every store at or below ROOT with Spark, one task per store, opening "
            "each read-only: every record's CRC and framing, every consume queue unit "
            "against its record, every queue for gaps, an index lookup of every key, and "
            "the _SUCCESS manifest. With --expected, also that the stored messages equal the "
            "source rows (topic, queue, keys, tags, body digest; both ways). Prints one line "
            "per check with examples of failures; exit status 1 if any check fails."
        ),
        epilog=(
            "examples:\n"
            "  rocketstore verify ./demo-store\n"
            "  rocketstore verify --no-spark ./demo-store\n"
            "  rocketstore verify /data/stores --expected orders.parquet --report verify.json"
        ),
        formatter_class=_HelpFormatter,
    )
    verify.add_argument("root", metavar="ROOT", help="a store or a directory of stores")
    verify.add_argument(
        "--expected", metavar="PATH", help="the source messages (Parquet, JSON or CSV)"
    )
    verify.add_argument(
        "--expected-format",
        choices=("parquet", "json", "csv"),
        help="format of --expected (default: from the file name)",
    )
    verify.add_argument(
        "--report",
        metavar="PATH",
        help="write the report as JSON (and a PNG plot next to it) to PATH",
    )
    verify.add_argument(
        "--sample-keys",
        type=_positive,
        metavar="N",
        help="look up only N evenly spread keyed messages per store (default: every key)",
    )
    verify.add_argument(
        "--no-spark",
        action="store_true",
        help="run the per-store checks in this process (one thread per store), without Spark "
        "(no --expected)",
    )
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument(
        "--examples", type=_positive, default=3, help="failure examples shown per check"
    )
    _config_arguments(verify, "a store setting for stores with non-default geometry (repeatable)")
    _spark_arguments(verify)
    verify.set_defaults(func=cmd_verify)


def _add_bench(sub: _Commands) -> None:
    bench = sub.add_parser(
        "bench",
        help="rocketstore against plain file/mmap/SQLite baselines (put, put_batch, reads, ...)",
        description=(
            "Measures, on the same data and in one run: put (one call per message), "
            "put_batch from Arrow, get_message batches, pull wake latency, query_message "
            "and abnormal recovery, and the baselines: the same encoded records appended to "
            "a plain file (the I/O floor) and copied into a pre-faulted mmap (the ceiling), "
            "an SQLite queue (WAL), and with --spark a Parquet write of the same DataFrame. "
            "Prints msgs/s, MB/s (body bytes) and each figure's ratio to its baseline."
        ),
    )
    bench.add_argument(
        "--sizes",
        type=_sizes,
        metavar="B1,B2,...",
        help="body sizes in bytes (default: 100,1024,4096)",
    )
    bench.add_argument(
        "--messages",
        type=_positive,
        metavar="N",
        help="messages per size (default: up to 1,000,000 and 256 MB of bodies)",
    )
    bench.add_argument(
        "--seconds",
        type=float,
        metavar="S",
        help="time box of each per-call loop: put, get_message, query_message, SQLite (default: 2)",
    )
    bench.add_argument(
        "--batch", type=_positive, metavar="ROWS", help="rows per put_batch (default: 16,384)"
    )
    bench.add_argument(
        "--file-size",
        type=_positive,
        metavar="BYTES",
        help="commit log file size (default: 256 MiB)",
    )
    bench.add_argument(
        "--dir",
        help="where to create the temporary stores, i.e. which disk "
        "(default: $ROCKETSTORE_BENCH_DIR, else $TMPDIR)",
    )
    bench.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    bench.add_argument(
        "--spark",
        action="store_true",
        help="also Spark: write and read 400,000 x 1 KiB rows as rocketstore and as Parquet",
    )
    bench.add_argument(
        "--spark-messages", type=_positive, metavar="N", help="rows of --spark (default: 400,000)"
    )
    bench.add_argument(
        "--peers",
        action="store_true",
        help="also LMDB, RocksDB, SQLite, Delta Lake and Parquet on the same messages "
        "(pip install 'rocketstore[bench]'): append, in-order read, key lookups, disk use",
    )
    bench.add_argument(
        "--peer-messages",
        type=_positive,
        metavar="N",
        help="messages per body size of --peers (default: 1,000,000)",
    )
    bench.add_argument(
        "--remote",
        action="store_true",
        help="also Spark on an S3 server (moto, on loopback): write and read 200,000 rows as "
        "rocketstore on an s3a:// root and as Parquet on the same server",
    )
    bench.add_argument(
        "--remote-messages",
        type=_positive,
        metavar="N",
        help="rows of --remote (default: 200,000)",
    )
    bench.add_argument(
        "--follow",
        action="store_true",
        help="also a reader process following this writer: wake latency from a put to a "
        "waiting pull in another process (p50/p99/p99.9), reader CPU while idle, tailing rate",
    )
    bench.add_argument(
        "--scale",
        action="store_true",
        help="also cost growth with size: stores of --scale-sizes GiB (fill, read, lookup, "
        "reopen, kill -9 recovery, cleanup)",
    )
    bench.add_argument(
        "--scale-sizes",
        type=_sizes,
        metavar="G1,G2,...",
        help="GiB of commit log of the --scale stores (default: 1,4)",
    )
    bench.add_argument(
        "--markdown",
        metavar="PATH",
        help="write this run's tables into PATH (BENCHMARKS.md): each between its "
        "<!-- BEGIN bench:NAME --> and <!-- END bench:NAME --> markers",
    )
    bench.add_argument("--plot", metavar="PNG", help="draw the peers' figures into PNG")
    bench.add_argument(
        "--from-json",
        metavar="PATH",
        help="measure nothing: write --markdown/--plot from the --json file of an earlier run",
    )
    bench.add_argument(
        "--criterion",
        metavar="DIR",
        help="target/criterion of a cargo bench run: its results go into --json/--markdown",
    )
    bench.add_argument(
        "--criterion-summary",
        metavar="PATH",
        help="the $ROCKETSTORE_BENCH_SUMMARY file of that cargo bench run",
    )
    bench.add_argument(
        "--since",
        type=float,
        metavar="EPOCH",
        help="when the whole run (make bench) started: criterion results older than this "
        "are left out, and the page shows the whole duration",
    )
    bench.add_argument(
        "--smoke", action="store_true", help="a tiny run of every figure (CI; about 10 s)"
    )
    bench.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    bench.set_defaults(func=cmd_bench)


def _add_inspect(sub: _Commands) -> None:
    inspect = sub.add_parser(
        "inspect",
        help="show the files, offsets, topics/queues and recovery report of stores",
        description=(
            "Opens ROOT read-only (no byte changes, no lock taken) and describes it: for one "
            "store its files, offsets, queues and recovery report; for a directory of stores "
            "one line per store plus the _SUCCESS manifest and the queues over all stores."
        ),
    )
    inspect.add_argument("root", metavar="ROOT", help="a store or a directory of stores")
    inspect.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _config_arguments(
        inspect,
        "a store setting, e.g. -c mapped_file_size_consume_queue=20480 "
        "(repeatable; see rocketstore.config_fields())",
    )
    inspect.set_defaults(func=cmd_inspect)


def _add_dump(sub: _Commands) -> None:
    dump = sub.add_parser(
        "dump",
        help="print the messages of one queue",
        description=(
            "Prints the messages of --topic/--queue from queue offset --from on (read "
            "through the consume queue, stores opened read-only). ROOT may be a store or a "
            "directory of stores; every store that has the queue is dumped."
        ),
        epilog=(
            "examples:\n"
            "  rocketstore dump ./demo-store --topic orders --queue 3 --from 0 --max 5\n"
            "  rocketstore dump ./my-store --topic TopicTest --queue 0 --json | jq .body"
        ),
        formatter_class=_HelpFormatter,
    )
    dump.add_argument("root", metavar="ROOT", help="a store or a directory of stores")
    dump.add_argument("--topic", required=True)
    dump.add_argument("--queue", type=int, required=True, metavar="QUEUE_ID")
    dump.add_argument(
        "--from",
        dest="offset",
        type=int,
        metavar="N",
        help="first queue offset (default: the queue's first)",
    )
    dump.add_argument(
        "--max", type=_positive, default=20, metavar="M", help="messages to print (default: 20)"
    )
    dump.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per message, with its sys_flag and whether the body is "
        "compressed (body as UTF-8 text, else base64)",
    )
    dump.add_argument(
        "--decompress",
        action="store_true",
        help="show compressed bodies decompressed, as a RocketMQ consumer sees them",
    )
    dump.add_argument(
        "--body-chars", type=_positive, default=80, help="body bytes shown per line (text)"
    )
    _config_arguments(dump, "a store setting (repeatable)")
    dump.set_defaults(func=cmd_dump)


def _add_rebuild_indexes(sub: _Commands) -> None:
    rebuild = sub.add_parser(
        "rebuild-indexes",
        help="rebuild the consume queues and index files of stores from their commit logs",
        description=(
            "Rebuilds the consume queues and index files of ROOT (a store, or every store "
            "below a directory) from the commit log. The stores must not be open elsewhere."
        ),
    )
    rebuild.add_argument("root", metavar="ROOT", help="a store or a directory of stores")
    _config_arguments(rebuild, "a store setting (repeatable)")
    rebuild.add_argument("--json", action="store_true", help="print one JSON object per store")
    rebuild.set_defaults(func=cmd_rebuild_indexes)


def _add_sweep(sub: _Commands) -> None:
    sweep = sub.add_parser(
        "sweep",
        help="list (--delete: remove) the objects of a remote root that no reader reads",
        description=(
            "Lists the remote root ROOT (s3a://, gs://, ...) and reports the prefixes no reader "
            "will read: store-* copies the newest manifest does not list (a driver killed "
            "between its copies and its manifest, an overwrite whose deletions did not finish) "
            "and _temporary/<job> uploads (killed jobs and task attempts). A dry run unless "
            "--delete; even then only prefixes whose newest object is older than --min-age "
            "are deleted, as a commit or a job in flight writes younger ones. Manifests, "
            "_SUCCESS and other objects are never touched."
        ),
    )
    sweep.add_argument("root", metavar="ROOT", help="a remote root (s3a://bucket/stores, ...)")
    sweep.add_argument(
        "--min-age",
        type=float,
        default=24.0,
        metavar="HOURS",
        help="delete only prefixes whose newest object is at least this old; longer than "
        "the longest write job or streaming trigger on the root (default: 24)",
    )
    sweep.add_argument(
        "--delete", action="store_true", help="delete them (default: only list them)"
    )
    sweep.add_argument("--json", action="store_true", help="print JSON")
    _config_arguments(sweep, "a file system setting, e.g. -c fs.s3a.endpoint=... (repeatable)")
    sweep.set_defaults(func=cmd_sweep)


def cmd_spark_jar(args: argparse.Namespace) -> int:
    """``rocketstore spark-jar``: the JVM connector's jar, for ``--jars``; with
    ``--maven-local``, installed into a local Maven repository, its coordinate for ``--packages``
    (no PySpark needed)."""
    if args.repo is not None and not args.maven_local:
        raise CliError("--repo is for --maven-local", EXIT_USAGE)
    jar = _connector.connector_jar()
    if not jar.is_file():
        raise CliError(f"this installation has no JVM connector ({jar})", EXIT_DEPENDENCY)
    if not args.maven_local:
        print(jar)
        return 0
    repo = Path(args.repo).expanduser().absolute() if args.repo else None
    default = _connector.default_repository()
    try:
        coord, installed = _connector.install_maven_local(jar, repo or default)
    except ValueError as e:
        raise CliError(str(e), EXIT_DEPENDENCY) from e
    except OSError as e:
        raise CliError(f"cannot install into {repo or default}: {e}", EXIT_IO) from e
    flags = f"--packages {coord}"
    if repo is not None and repo != default:
        flags += f" --repositories {repo.as_uri()}"
    print(f"rocketstore: installed {installed}; use: spark-submit {flags} ...", file=sys.stderr)
    print(coord)
    return 0


def _add_spark_jar(sub: _Commands) -> None:
    jar = sub.add_parser(
        "spark-jar",
        help="print the path of the JVM Spark connector's jar (for spark-submit --jars), or "
        "install it into the local Maven repository (for --packages)",
        description=(
            "Prints the path of rocketstore-spark.jar, the JVM connector the wheel ships (its "
            "native library inside), for Spark jobs in Scala, Java or SQL: "
            'spark-submit --jars "$(rocketstore spark-jar)" ... then format("rocketstore"). '
            "With --maven-local, installs it (with a POM) into the local Maven repository, "
            "which spark-submit --packages reads before any remote one, and prints its "
            f"coordinate, {_connector.GROUP}:rocketstore-spark_<scala>:<version>: "
            'spark-submit --packages "$(rocketstore spark-jar --maven-local)" .... '
            "Exit status 7 if this installation has no connector."
        ),
    )
    jar.add_argument(
        "--maven-local",
        action="store_true",
        help="install the jar into the local Maven repository (~/.m2/repository) and print "
        "its --packages coordinate",
    )
    jar.add_argument(
        "--repo",
        metavar="DIR",
        help="the Maven repository to install into instead of ~/.m2/repository (then also pass "
        "spark-submit --repositories file://DIR)",
    )
    jar.set_defaults(func=cmd_spark_jar)
