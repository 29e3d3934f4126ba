#!/usr/bin/env bash
# Alternates read_probe.py runs between builds of rocketstore, one process per run, and prints
# the median msg/s, process CPU ns per message and cores busy of each (with the range).
#
#   benches/read_ab.sh snapshot NAME      # copy python/rocketstore (with the extension built
#                                         # now) to $AB_DIR/NAME (default /tmp/rocketstore-ab)
#   benches/read_ab.sh ROUNDS SIZE FIGURE PASSES NAME... [file]
#
# `file` runs the `file_read` baseline (readinto() of the same commit log files) with the
# first build. On a shared machine only alternated runs compare builds: its speed drifts
# within minutes. Prepare the stores first: `python benches/read_probe.py SIZE prep`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ab=${AB_DIR:-/tmp/rocketstore-ab}
py=${PYTHON:-$root/.venv/bin/python}
if [ "${1:-}" = snapshot ]; then
    rm -rf "$ab/$2" && mkdir -p "$ab/$2" && cp -r "$root/python/rocketstore" "$ab/$2/"
    echo "$ab/$2"
    exit 0
fi
rounds=$1 size=$2 figure=$3 passes=$4
shift 4
first=$1
out=$(mktemp)
for _ in $(seq "$rounds"); do
    for name in "$@"; do
        fig=$figure build=$name
        if [ "$name" = file ]; then fig=file_read build=$first; fi
        PYTHONPATH="$ab/$build" "$py" "$root/benches/read_probe.py" "$size" "$fig" "$passes" |
            awk -v n="$name" '{print n, $6, $9, $14}' >> "$out"
    done
done
"$py" - "$out" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, rate, cpu, busy = line.split()
    runs[name].append((float(rate), int(cpu), float(busy)))
for name, xs in runs.items():
    rate, cpu, busy = ([x[i] for x in xs] for i in range(3))
    print(f"{name}: {statistics.median(rate):.2f} M msg/s ({min(rate):.2f}-{max(rate):.2f}), "
          f"{statistics.median(cpu):.0f} ns CPU/msg ({min(cpu)}-{max(cpu)}), "
          f"{statistics.median(busy):.2f} cores busy, {len(xs)} runs")
PY
rm -f "$out"
