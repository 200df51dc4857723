#!/usr/bin/env bash
# Control plane at scale, against the baseline users have (c10d TCPStore), side by side.
#
# For each N, REPEATS times:
#   Baton: a fresh baton-coordinator (--insecure on loopback, OS-chosen ports, temporary
#     state directory, worker lease LEASE + LEASE_MARGIN, stream limits above WATCHERS: every
#     watcher is the same anonymous user, past the default 32 per user) under N simulated
#     worker daemons plus one spare (bench/control_plane/load_generator): submit -> last
#     StartAssignment, submit -> RUNNING; over a steady window (heartbeats every 1 s, a metric
#     point per rank every METRIC_PERIOD, WATCHERS WatchJob streams, a client listing jobs and
#     workers every second) the coordinator's CPU s/s, RSS, store transactions (fsyncs) per
#     second and the watchers' latency; then one running worker goes silent and the job's
#     RESTARTING and next RUNNING are timed from its last heartbeat; then every rank exits 0.
#   TCPStore: bench/control_plane/tcpstore_baseline.py with N clients: torchrun's rendezvous
#     pattern (add/set/wait/get) on one TCPStore server, then a keep-alive set per client
#     per second over the same window; the server's CPU s/s and RSS.
# Prints min/median/max per N, writes every raw line and a chart (plot.sh) to OUT, and
# prints the ratios at N = 1000 last.
#
#   bench/control_plane/run.sh [N...]          (default: 100 1000 5000 10000)
#   REPEATS=3 STEADY=20s WATCHERS=100 OUT=bench-out/control_plane bench/control_plane/run.sh
#   TCPSTORE_MAX=5000: no baseline above this N (each client is 2 threads and 2 sockets).
#
# Run from the repository root on an otherwise idle machine: the generator and the
# baseline's clients share it with what they measure.
#
# FAILOVER=1 bench/control_plane/run.sh [N...]: instead, the coordinator killed -9 under N
# workers, today's restart against replicas on etcd, and the steady state on etcd against
# SQLite; see failover.sh.
set -euo pipefail

REPEATS=${REPEATS:-3}
STEADY=${STEADY:-20s}
METRIC_PERIOD=${METRIC_PERIOD:-10s}
WATCHERS=${WATCHERS:-100}
LEASE=${LEASE:-5s}
LEASE_MARGIN=${LEASE_MARGIN:-1s}
TCPSTORE_MAX=${TCPSTORE_MAX:-5000}
OUT=${OUT:-bench-out/control_plane}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}  # Debian's, with python3-torch
SIZES=("$@")
[[ ${#SIZES[@]} -gt 0 ]] || SIZES=(100 1000 5000 10000)
HERE=$(cd "$(dirname "$0")" && pwd)

if [[ ${FAILOVER:-0} != 0 ]]; then
  [[ $# -gt 0 ]] || SIZES=(100 1000)
  RESULTS_NAME=failover.txt
fi

build_log=$(bazel build //coordinator:baton-coordinator //bench/control_plane:load_generator 2>&1) || {
  echo "$build_log" | tail -30 >&2
  exit 1
}
BIN=$(bazel info bazel-bin 2>/dev/null)
COORDINATOR=$BIN/coordinator/baton-coordinator
GENERATOR=$BIN/bench/control_plane/load_generator
mkdir -p "$OUT"
RESULTS=$OUT/${RESULTS_NAME:-results.txt}
: >"$RESULTS"
TMP=$(mktemp -d -t baton-cp-bench.XXXXXX)
COORDINATOR_PID=
EXTRA_PIDS=()  # FAILOVER's daemons and etcd (not all children of this shell)
cleanup() {
  [[ -n $COORDINATOR_PID ]] && kill "$COORDINATOR_PID" 2>/dev/null && wait "$COORDINATOR_PID" 2>/dev/null
  local p deadline=$((SECONDS + 10))
  for p in "${EXTRA_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${EXTRA_PIDS[@]}"; do
    while kill -0 "$p" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
    kill -9 "$p" 2>/dev/null
  done
  [[ -n ${KEEP_TMP:-} ]] || rm -rf "$TMP"
  true
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"  # N streams and the baseline's 2N sockets

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); steady window $STEADY," \
  "metric period $METRIC_PERIOD, $WATCHERS watchers, lease $LEASE + $LEASE_MARGIN," \
  "$REPEATS repeats; raw lines in $RESULTS"

# await_file FILE PID: waits (30 s) for the daemon PID to write FILE.
await_file() {
  local deadline=$((SECONDS + 30))
  until [[ -s $1 ]]; do
    kill -0 "$2" 2>/dev/null || return 1
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

# baton_once N REP [etcd]: one fresh coordinator and one generator run; appends the result
# line. With etcd (FAILOVER mode): the coordinator is a lone replica on a fresh etcd member
# (start_etcd, failover.sh), the line gets etcd's writes and CPU over the window and etcd=1.
baton_once() {
  local n=$1 rep=$2 store=${3:-sqlite} dir=$TMP/$1-$2-${3:-sqlite}
  local store_flags=() etcd_flags=() tag=""
  mkdir -p "$dir"
  if [[ $store == etcd ]]; then
    start_etcd "$dir"
    store_flags=(--store="etcd://$ETCD_ENDPOINT/bench?max_txn_ops=$ETCD_MAX_TXN_OPS")
    etcd_flags=(--etcd_metrics="$ETCD_ENDPOINT" --etcd_pid="$ETCD_PID")
    tag=" etcd=1"
  elif [[ ${FAILOVER:-0} != 0 ]]; then
    tag=" etcd=0"
  fi
  "$COORDINATOR" --insecure --listen=127.0.0.1:0 --port_file="$dir/port" \
    --metrics_listen=127.0.0.1:0 --metrics_port_file="$dir/metrics_port" \
    --worker_lease="$LEASE" --worker_lease_margin="$LEASE_MARGIN" \
    --max_streams_per_user=$((WATCHERS + 1)) --max_streams=$((WATCHERS + 64)) \
    "${store_flags[@]}" --state_dir="$dir/state" 2>"$dir/coordinator.log" &
  COORDINATOR_PID=$!
  if ! await_file "$dir/port" "$COORDINATOR_PID" || ! await_file "$dir/metrics_port" "$COORDINATOR_PID" ||
    { [[ $store == etcd ]] && ! await_leader bench; }; then
    echo "N=$n: the coordinator did not start" >&2
    tail -n 5 "$dir/coordinator.log" >&2
    return 1
  fi
  local rc=0
  timeout 900 "$GENERATOR" --coordinator="127.0.0.1:$(cat "$dir/port")" --workers="$n" \
    --watchers="$WATCHERS" --steady="$STEADY" --metric_period="$METRIC_PERIOD" \
    --metrics="127.0.0.1:$(cat "$dir/metrics_port")" --lose_worker "${etcd_flags[@]}" \
    --coordinator_pid="$COORDINATOR_PID" --timeout=600s >"$dir/out.txt" 2>"$dir/err.txt" || rc=$?
  kill "$COORDINATOR_PID" 2>/dev/null
  wait "$COORDINATOR_PID" 2>/dev/null || true
  COORDINATOR_PID=
  [[ $store == etcd ]] && stop_etcd
  if [[ $rc -ne 0 ]]; then
    echo "N=$n repeat $rep ($store): load_generator exited $rc" >&2
    tail -n 5 "$dir/err.txt" "$dir/coordinator.log" >&2
    return 1
  fi
  echo "$(grep '^result ' "$dir/out.txt")$tag" | tee -a "$RESULTS"
}

if [[ ${FAILOVER:-0} != 0 ]]; then
  source "$HERE/failover.sh"
  failover_main
  exit 0
fi

# tcpstore_once N: one baseline run; appends its line.
tcpstore_once() {
  local steady_s=${STEADY%s}
  "$TORCH_PY" "$HERE/tcpstore_baseline.py" --clients "$1" --steady "$steady_s" --timeout 900 \
    2>"$TMP/tcpstore-$1.err" | tee -a "$RESULTS" || {
    echo "N=$1: tcpstore_baseline failed" >&2
    tail -n 5 "$TMP/tcpstore-$1.err" >&2
    return 1
  }
}

for n in "${SIZES[@]}"; do
  for rep in $(seq "$REPEATS"); do
    baton_once "$n" "$rep"
    if ((n <= TCPSTORE_MAX)); then tcpstore_once "$n"; fi
  done
done

"$HERE/plot.sh" "$RESULTS" "$OUT/control_plane.png" && echo "chart: $OUT/control_plane.png"

"$TORCH_PY" - "$RESULTS" <<'PYEOF'
import collections, statistics, sys
baton = collections.defaultdict(list)
store = collections.defaultdict(list)
for line in open(sys.argv[1]):
    fields = line.split()
    if not fields or fields[0] not in ("result", "tcpstore"):
        continue
    kv = {}
    for f in fields[1:]:
        k, v = f.split("=", 1)
        try:
            kv[k] = float(v)
        except ValueError:
            pass
    if fields[0] == "result":
        baton[int(kv["workers"])].append(kv)
    else:
        store[int(kv["clients"])].append(kv)

def row(label, runs, key, fmt):
    v = sorted(r[key] for r in runs if key in r)
    if not v:
        return
    print("| %s | %s | %s | %s |" % (label, fmt % v[0], fmt % statistics.median(v), fmt % v[-1]))

BATON = [("submit -> last StartAssignment (s)", "submit_to_last_start_s", "%.3f"),
         ("submit -> RUNNING (s)", "submit_to_running_s", "%.3f"),
         ("coordinator CPU s/s, steady", "coord_cpu_per_s", "%.3f"),
         ("coordinator RSS MiB, steady (end)", "coord_rss_mib", "%.1f"),
         ("store transactions (fsyncs)/s, steady", "store_commits_per_s", "%.1f"),
         ("event loop share in store transactions", "store_busy", "%.4f"),
         ("watch latency p50 (ms)", "watch_latency_p50_ms", "%.1f"),
         ("watch latency p99 (ms)", "watch_latency_p99_ms", "%.1f"),
         ("last heartbeat -> RESTARTING (s)", "detect_s", "%.3f"),
         ("last heartbeat -> next generation RUNNING (s)", "restart_s", "%.3f"),
         ("register N+1 workers (s)", "register_s", "%.3f"),
         ("every exit 0 sent -> SUCCEEDED seen (s)", "finish_to_end_s", "%.3f"),
         ("ListJobs ms (median of window)", "list_jobs_ms", "%.1f"),
         ("ListWorkers ms (median of window)", "list_workers_ms", "%.1f"),
         ("generator CPU s/s, steady", "gen_cpu_per_s", "%.3f")]
STORE = [("TCPStore: connect N clients (s)", "connect_s", "%.3f"),
         ("TCPStore: rendezvous (s)", "rendezvous_s", "%.3f"),
         ("TCPStore: server CPU s/s, keep-alives", "server_cpu_per_s", "%.3f"),
         ("TCPStore: server RSS MiB", "server_rss_mib", "%.1f")]
for n in sorted(set(baton) | set(store)):
    print("\nN = %d (%d Baton runs, %d TCPStore runs)\n| | min | median | max |\n|---|---|---|---|"
          % (n, len(baton[n]), len(store[n])))
    for label, key, fmt in BATON:
        row(label, baton[n], key, fmt)
    for label, key, fmt in STORE:
        row(label, store[n], key, fmt)

def med(runs, key):
    v = [r[key] for r in runs if key in r]
    return statistics.median(v) if v else None

n = 1000
if baton[n] and store[n]:
    b_run, s_run = med(baton[n], "submit_to_running_s"), med(store[n], "rendezvous_s")
    b_cpu, s_cpu = med(baton[n], "coord_cpu_per_s"), med(store[n], "server_cpu_per_s")
    print("\nAt N = 1000 (medians): rendezvous, TCPStore %.3f s / Baton submit -> RUNNING %.3f s"
          " = %.2fx" % (s_run, b_run, s_run / b_run))
    print("At N = 1000 (medians): steady server CPU, TCPStore keep-alives %.3f / Baton "
          "coordinator (heartbeats, points, %d watchers, listing) %.3f = %.2fx"
          % (s_cpu, int(med(baton[n], "watchers")), b_cpu, s_cpu / b_cpu))
PYEOF
