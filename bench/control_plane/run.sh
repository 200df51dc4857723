#!/usr/bin/env bash
# Control plane at scale: for each N, a fresh baton-coordinator (--insecure on loopback,
# OS-chosen port, temporary state directory) under N simulated worker daemons
# (bench/control_plane/load_generator): submit -> last StartAssignment, submit -> RUNNING,
# and over a steady window (heartbeats every 1 s, a metric point per rank every 10 s,
# 2 watchers, a client listing jobs and workers every second) the coordinator's CPU
# seconds per second and RSS. Prints min/median/max over REPEATS runs per N.
#
#   bench/control_plane/run.sh [N...]          (default: 100 1000)
#   REPEATS=3 STEADY=20s METRIC_PERIOD=10s WATCHERS=2 bench/control_plane/run.sh 100
#
# N is at most 1024: the coordinator's limit on workers.min (common/spec/job_spec.h).
# Run from the repository root on an otherwise idle machine: the generator shares it.
set -euo pipefail

REPEATS=${REPEATS:-3}
STEADY=${STEADY:-20s}
METRIC_PERIOD=${METRIC_PERIOD:-10s}
WATCHERS=${WATCHERS:-2}
PY=${PY:-python3}
SIZES=("$@")
[[ ${#SIZES[@]} -gt 0 ]] || SIZES=(100 1000)

build_log=$(bazel build //coordinator:baton-coordinator //bench/control_plane:load_generator 2>&1) || {
  echo "$build_log" | tail -30 >&2
  exit 1
}
BIN=$(bazel info bazel-bin 2>/dev/null)
COORDINATOR=$BIN/coordinator/baton-coordinator
GENERATOR=$BIN/bench/control_plane/load_generator
TMP=$(mktemp -d -t baton-cp-bench.XXXXXX)
COORDINATOR_PID=
cleanup() {
  [[ -n $COORDINATOR_PID ]] && kill "$COORDINATOR_PID" 2>/dev/null && wait "$COORDINATOR_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); steady window $STEADY," \
  "metric period $METRIC_PERIOD, $WATCHERS watchers, $REPEATS repeats"

# run_once N REP: one fresh coordinator and one generator run; appends the result line.
run_once() {
  local n=$1 rep=$2 dir=$TMP/$1-$2
  mkdir -p "$dir"
  "$COORDINATOR" --insecure --listen=127.0.0.1:0 --port_file="$dir/port" \
    --metrics_listen=127.0.0.1:0 --state_dir="$dir/state" 2>"$dir/coordinator.log" &
  COORDINATOR_PID=$!
  local deadline=$((SECONDS + 30))
  until [[ -s $dir/port ]]; do
    kill -0 "$COORDINATOR_PID" 2>/dev/null || { cat "$dir/coordinator.log" >&2; exit 1; }
    ((SECONDS < deadline)) || { echo "no port file within 30 s" >&2; exit 1; }
    sleep 0.05
  done
  local rc=0
  timeout 600 "$GENERATOR" --coordinator="127.0.0.1:$(cat "$dir/port")" --workers="$n" \
    --watchers="$WATCHERS" --steady="$STEADY" --metric_period="$METRIC_PERIOD" \
    --coordinator_pid="$COORDINATOR_PID" --timeout=300s >"$dir/out.txt" 2>"$dir/err.txt" || rc=$?
  kill "$COORDINATOR_PID" 2>/dev/null
  wait "$COORDINATOR_PID" 2>/dev/null || true
  COORDINATOR_PID=
  if [[ $rc -ne 0 ]]; then
    echo "N=$n repeat $rep: load_generator exited $rc" >&2
    tail -5 "$dir/err.txt" "$dir/coordinator.log" >&2
    return 1
  fi
  grep '^result ' "$dir/out.txt" | tee -a "$TMP/results.txt"
}

for n in "${SIZES[@]}"; do
  for rep in $(seq "$REPEATS"); do
    run_once "$n" "$rep"
  done
done

"$PY" - "$TMP/results.txt" <<'PYEOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split()[1:])
    runs[int(kv["workers"])].append({k: float(v) for k, v in kv.items() if k != "ended"})
rows = [("submit -> last StartAssignment (s)", "submit_to_last_start_s", "%.3f"),
        ("submit -> RUNNING (s)", "submit_to_running_s", "%.3f"),
        ("coordinator CPU s/s, steady", "coord_cpu_per_s", "%.3f"),
        ("coordinator RSS MiB, steady (end)", "coord_rss_mib", "%.1f"),
        ("register N workers (s)", "register_s", "%.3f"),
        ("every exit 0 sent -> SUCCEEDED seen (s)", "finish_to_end_s", "%.3f"),
        ("ListJobs ms (median of window)", "list_jobs_ms", "%.1f"),
        ("ListWorkers ms (median of window)", "list_workers_ms", "%.1f"),
        ("generator CPU s/s, steady", "gen_cpu_per_s", "%.3f")]
for n in sorted(runs):
    print("\nN = %d (%d runs)\n| | min | median | max |\n|---|---|---|---|" % (n, len(runs[n])))
    for label, key, fmt in rows:
        v = sorted(r[key] for r in runs[n])
        print("| %s | %s | %s | %s |" % (label, fmt % v[0], fmt % statistics.median(v), fmt % v[-1]))
PYEOF
