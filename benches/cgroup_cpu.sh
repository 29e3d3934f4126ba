#!/usr/bin/env bash
# Runs a command in a fresh cgroup-v1 cpuacct group and prints its wall time, the CPU time of
# every process it started (Spark's JVM, the Python workers, exited ones included), and the
# load average before and after. Needs write access to /sys/fs/cgroup/cpuacct (root).
#
#   benches/cgroup_cpu.sh .venv/bin/rocketstore demo
set -euo pipefail
cg=/sys/fs/cgroup/cpuacct/rocketstore-bench-$$
mkdir "$cg"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s.%N)
rc=0
bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$cg" "$@" || rc=$?
t1=$(date +%s.%N)
# Wait for stragglers (the JVM may outlive the driver by a moment) before reading the total.
for _ in $(seq 50); do [[ -z "$(cat "$cg/cgroup.procs")" ]] && break; sleep 0.2; done
usage=$(cat "$cg/cpuacct.usage")
read -r _ user _ sys < <(tr "\n" " " < "$cg/cpuacct.stat") || true
printf 'cgroup_cpu: wall %.2f s, cpu %.2f s (user %.2f s, sys %.2f s; all processes), load %s -> %s\n' \
  "$(echo "$t1 - $t0" | bc)" "$(echo "$usage / 1000000000" | bc -l)" \
  "$(echo "$user / $(getconf CLK_TCK)" | bc -l)" "$(echo "$sys / $(getconf CLK_TCK)" | bc -l)" \
  "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" >&2
exit $rc
