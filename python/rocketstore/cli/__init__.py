"""The ``rocketstore`` command: Spark jobs (demo, ingest, verify) and store tools.

Run ``rocketstore --help`` (or ``python -m rocketstore --help``) for the subcommands:

* ``rocketstore demo``: generate 1,000,000 messages as a Spark DataFrame, ingest them into
  ``./demo-store`` (4 stores), verify them against the source and print the report and the
  throughput. ``--no-spark`` runs the quick single-process demo (put_batch + scan).
* ``rocketstore ingest --input PATH --store ROOT``: Parquet/JSON/CSV messages into N stores.
* ``rocketstore verify ROOT``: CRCs, framing, consume queues, gaps, index, manifest and
  (``--expected``) equality with the source; exit status 1 if a check fails.
* ``rocketstore inspect ROOT``: files, offsets, topics/queues and the recovery report of a
  store or of every store under a directory (opened read-only: nothing is changed).
* ``rocketstore dump ROOT --topic T --queue Q --from N``: messages of one queue.
* ``rocketstore rebuild-indexes ROOT``: rebuild consume queues and index from the commit log.
* ``rocketstore bench``: put/put_batch/read/recovery figures against plain file, mmap and
  SQLite baselines (``--smoke`` for a 10-second run, ``--json`` for the figures).

The Spark commands need ``pip install 'rocketstore[spark]'`` and Java 17+; the others do not
import PySpark.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from rocketstore._stores import find_stores
from rocketstore.cli._demo import demo_geometry, demo_table
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
    """Entry point of the ``rocketstore`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except MessageStoreError as e:
        print(f"rocketstore {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"rocketstore {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `rocketstore dump ... | head`: the reader left
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return result
