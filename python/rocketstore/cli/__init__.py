"""The ``rocketstore`` command: Spark jobs (demo, ingest, verify) and store tools.

Run ``rocketstore --help`` (or ``python -m rocketstore --help``) for the subcommands:

* ``rocketstore demo``: generate 1,000,000 messages as a Spark DataFrame, ingest them into
  ``./demo-store`` (4 stores), verify them against the source and print the report and the
  throughput. ``--no-spark`` runs the quick single-process demo (put_batch + scan).
* ``rocketstore ingest --input PATH --store ROOT``: Parquet/JSON/CSV messages into N stores.
* ``rocketstore verify ROOT``: CRCs, framing, consume queues, gaps, index, manifest and
  (``--expected``) equality with the source; exit status 1 if a check fails. ``--no-spark``
  runs the per-store checks without PySpark.
* ``rocketstore inspect ROOT``: files, offsets, topics/queues and the recovery report of a
  store or of every store under a directory (opened read-only: nothing is changed).
* ``rocketstore dump ROOT --topic T --queue Q --from N``: messages of one queue.
* ``rocketstore rebuild-indexes ROOT``: rebuild consume queues and index from the commit log.
* ``rocketstore bench``: put/put_batch/read/recovery figures against plain file, mmap and
  SQLite baselines (``--smoke`` for a 10-second run, ``--json`` for the figures).

The Spark commands need ``pip install 'rocketstore[spark]'`` and Java 17+; the others do not
import PySpark. Every error is one line on stderr with an exit status naming its kind
(:mod:`rocketstore.cli._errors`, ``rocketstore --help``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from rocketstore._stores import find_stores
from rocketstore.cli._demo import demo_geometry, demo_table
from rocketstore.cli._errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_PIPE,
    CliError,
    exit_status,
)
from rocketstore.cli._parser import build_parser
from rocketstore.cli._tools import inspect_root, inspect_store, parse_config
from rocketstore.exceptions import MessageStoreError

__all__ = [
    "build_parser",
    "demo_geometry",
    "demo_table",
    "find_stores",
    "inspect_root",
    "inspect_store",
    "main",
    "parse_config",
]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rocketstore`` console script.

    Returns the exit status (see :mod:`rocketstore.cli._errors`): every failure is one line on
    stderr, ``rocketstore COMMAND: ...``, with a status naming its kind.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except KeyboardInterrupt:
        print(f"rocketstore {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `rocketstore dump ... | head`: the reader left
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE
    except Exception as e:
        status = exit_status(e)
        if status == EXIT_INTERNAL and os.environ.get("ROCKETSTORE_DEBUG"):
            raise
        print(f"rocketstore {args.command}: {_one_line(e)}", file=sys.stderr)
        if status == EXIT_INTERNAL:
            print(
                f"rocketstore {args.command}: internal error; run with ROCKETSTORE_DEBUG=1 "
                "for the traceback",
                file=sys.stderr,
            )
        return status
    return result


def _one_line(e: BaseException) -> str:
    """``e`` as one line: its class (but for the command's own errors) and message."""
    text = " ".join(str(e).split()) or repr(e)
    if isinstance(e, CliError):
        return text
    if isinstance(e, OSError) and not isinstance(e, MessageStoreError) and e.strerror:
        where = f": {e.filename}" if e.filename else ""
        return f"{type(e).__name__}: {e.strerror}{where}"
    return f"{type(e).__name__}: {text}"
