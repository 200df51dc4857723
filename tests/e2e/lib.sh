# Shared helpers for Baton's end-to-end tests: real daemons on loopback (ports chosen by
# the OS), the real CLI, real signals. Source it from a test; it cleans up on exit.
set -euo pipefail

RUNFILES=${TEST_SRCDIR:-$PWD}/baton
[[ -d "$RUNFILES" ]] || RUNFILES=$PWD
COORDINATOR_BIN=$RUNFILES/coordinator/baton-coordinator
WORKER_BIN=$RUNFILES/worker/baton-worker
TRAINER_BIN=$RUNFILES/worker/trainer/baton-trainer
BATON=$RUNFILES/client/baton
MAKE_MNIST=$RUNFILES/tools/make_mnist
EXAMPLES=$RUNFILES/examples
PY=/usr/bin/python3

TMP=${TEST_TMPDIR:-$(mktemp -d)}/e2e
rm -rf "$TMP"
mkdir -p "$TMP"
COORDINATOR_PID=
declare -A WORKER_PIDS=()
# Other processes a test started (e.g. a Prometheus server); stopped first on exit.
EXTRA_PIDS=()

_e2e_cleanup() {
  local rc=$?
  local pids=("${EXTRA_PIDS[@]}" "${WORKER_PIDS[@]}" $COORDINATOR_PID)
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if ((rc != 0)); then
    for f in "$TMP"/*.log; do
      [[ -f "$f" ]] || continue
      echo "----- $f (last 40 lines)" >&2
      tail -n 40 "$f" >&2
    done
  fi
  exit $rc
}
trap _e2e_cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# wait_for SECONDS CMD...: polls CMD until it succeeds, failing the test at the deadline.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "timed out waiting for: $*"
    sleep 0.05
  done
}

# start_coordinator [PORT]: port 0 (the OS picks) unless given (restart on the same port).
start_coordinator() {
  local port=${1:-0}
  rm -f "$TMP/port"
  rm -f "$TMP/coordinator.metrics_port"
  "$COORDINATOR_BIN" --listen="127.0.0.1:$port" --port_file="$TMP/port" \
    --metrics_listen=127.0.0.1:0 --metrics_port_file="$TMP/coordinator.metrics_port" \
    --state_dir="$TMP/state" --heartbeat_timeout=3s --stop_grace=2s \
    --reattach_timeout=20s 2>>"$TMP/coordinator.log" &
  COORDINATOR_PID=$!
  wait_for 30 test -s "$TMP/port"
  COORDINATOR_PORT=$(cat "$TMP/port")
  export BATON_COORDINATOR=127.0.0.1:$COORDINATOR_PORT
}

# start_worker NAME: a worker daemon with one slot and its own work dir. Its metrics port
# (OS-chosen) lands in $TMP/NAME.metrics_port.
start_worker() {
  rm -f "$TMP/$1.metrics_port"
  "$WORKER_BIN" --coordinator="$BATON_COORDINATOR" --work_dir="$TMP/$1" --slots=1 \
    --trainer="$TRAINER_BIN" --metrics_listen=127.0.0.1:0 \
    --metrics_port_file="$TMP/$1.metrics_port" 2>>"$TMP/$1.log" &
  WORKER_PIDS[$1]=$!
}

# ready_workers: how many workers the coordinator sees READY.
ready_workers() { "$BATON" workers -o json | json_get 'sum(1 for w in d.get("workers", []) if w.get("state") == "WORKER_STATE_READY")'; }

wait_for_workers() {
  local n=$1
  _enough_workers() { [[ $(ready_workers) -ge $n ]]; }
  wait_for 60 _enough_workers
}

# json_get EXPR: evaluates a Python expression over the JSON document on stdin (as d).
json_get() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# job_field JOB EXPR: evaluates EXPR over `baton describe JOB -o json` (as d).
job_field() { "$BATON" describe "$1" -o json | json_get "$2"; }

job_state() { job_field "$1" 'd.get("state", "")'; }

# generation_and_pid JOB RANK: "GENERATION PID" of RANK in the job's current generation,
# from one snapshot (so the pid belongs to that generation).
generation_and_pid() {
  job_field "$1" "d['generation'], [r['pid'] for r in d['ranks'] if r.get('rank', 0) == $2][0]"
}

# job_succeeded JOB: true once the job SUCCEEDED; fails the test at once if it FAILED or
# was CANCELLED (for wait_for).
job_succeeded() {
  local s
  s=$(job_state "$1")
  [[ $s == JOB_STATE_FAILED || $s == JOB_STATE_CANCELLED ]] && fail "job ended $s: $("$BATON" describe "$1")"
  [[ $s == JOB_STATE_SUCCEEDED ]]
}

# make_data DIR: a small learnable MNIST-format data set.
make_data() { "$MAKE_MNIST" --out_dir="$1" --train_size=4000 --test_size=500 >/dev/null; }

# alive PID: the process exists (and is not a zombie).
alive() {
  [[ -e /proc/$1 ]] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}
