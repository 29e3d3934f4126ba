"""Checks the JSON line tests/jvm_order_job.py printed: the JVM connector of the wheel served the
plain session's read and write, and the counts are right. Exit status 1 names what is wrong.

Usage (the release workflow, on each platform's wheel)::

    python tests/check_jvm_report.py report.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: The rows per tag jvm_order_job.py writes (2,000 rows, tag ``Tag<id % 3>``).
COUNTS = {"Tag0": 667, "Tag1": 667, "Tag2": 666}


def problems(report: dict[str, Any]) -> list[str]:
    """What in a jvm_order_job.py report shows the JVM connector did not serve the job."""
    found = []
    if not report.get("connector_jar"):
        found.append("rocketstore.DefaultSource is not on the session's classpath")
    default = report.get("default", {})
    if default.get("counts") != COUNTS:
        found.append(f"counts {default.get('counts')} != {COUNTS}")
    if "rocketstore JVM reader" not in default.get("read_plan", ""):
        found.append(f"the read is not the JVM reader's: {default.get('read_plan')}")
    if not [p for p in report.get("write_plans", []) if "rocketstore JVM writer" in p]:
        found.append(f"no write by the JVM writer: {report.get('write_plans')}")
    return found


def main(argv: list[str]) -> int:
    report = json.loads(Path(argv[1]).read_text().strip().splitlines()[-1])
    found = problems(report)
    for p in found:
        print(f"ERROR: {p}", file=sys.stderr)
    if not found:
        print(f"OK: the JVM connector ({report['connector_jar']}) read and wrote")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
