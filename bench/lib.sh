# Shared by the bench scripts: building baton-trainer, reading its metric lines and
# summarising repeats. Source it from the repository root after setting PY (a python3) and
# WARMUP (steps left out of the rates).

# build_targets TARGET...: builds them (on failure prints the build's last lines and
# exits) and sets BIN to bazel-bin.
build_targets() {
  local build_log
  if ! build_log=$(bazel build "$@" 2>&1); then
    echo "$build_log" | tail -30 >&2
    exit 1
  fi
  BIN=$(bazel info bazel-bin 2>/dev/null)
}

# build_trainer: build_targets of baton-trainer and make_mnist.
build_trainer() { build_targets //worker/trainer:baton-trainer //tools:make_mnist; }

# cluster_bench_setup: build_targets of the daemons, the CLI, the trainer and make_mnist;
# TMP (a fresh directory, removed on exit) holding MNIST-format data in $TMP/mnist (12000
# training samples); one OpenMP/BLAS thread per process.
cluster_bench_setup() {
  build_targets //coordinator:baton-coordinator //worker:baton-worker \
    //worker/trainer:baton-trainer //client:baton //tools:make_mnist
  TMP=$(mktemp -d -t baton-bench.XXXXXX)
  trap 'rm -rf "$TMP"' EXIT
  "$BIN/tools/make_mnist" --out_dir="$TMP/mnist" --train_size=12000 --test_size=100 >/dev/null
  export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
}

# trainer_bench_setup: build_trainer, then TRAINER (the binary), TMP (a fresh directory,
# removed on exit) and one OpenMP/BLAS thread per process (the scripts choose threads with
# --threads).
trainer_bench_setup() {
  build_trainer
  TRAINER=$BIN/worker/trainer/baton-trainer
  TMP=$(mktemp -d -t baton-bench.XXXXXX)
  trap 'rm -rf "$TMP"' EXIT
  export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
}

# baton_rate METRICS: steady-state global samples/s of a run from its metric lines (steps
# after the warmup): harmonic mean of the per-window rates (equal-step windows).
baton_rate() {
  $PY - "$1" "$WARMUP" <<'PYEOF'
import json, sys
rates = [json.loads(l)["samples_per_sec"] for l in open(sys.argv[1])
         if l.strip() and json.loads(l)["step"] > int(sys.argv[2]) and "samples_per_sec" in json.loads(l)]
print(len(rates) / sum(1.0 / r for r in rates))
PYEOF
}

# baton_split METRICS: mean step-time split (ms) of a run's metric lines after the warmup.
baton_split() {
  $PY - "$1" "$WARMUP" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip() and '"beat"' not in l]
rows = [r for r in rows if r["step"] > int(sys.argv[2]) and "time_step_s" in r]
keys = ["step", "data", "forward", "backward", "comm_wait", "optimizer"]
print("  ".join("%s %.2f" % (k, 1e3 * sum(r["time_%s_s" % k] for r in rows) / len(rows))
                for k in keys))
PYEOF
}

# stats VALUE...: "min M  median M  max M".
stats() { $PY -c 'import statistics,sys; v=sorted(map(float,sys.argv[1:])); print("min %.0f  median %.0f  max %.0f" % (v[0], statistics.median(v), v[-1]))' "$@"; }

# median VALUE...
median() { $PY -c 'import statistics,sys; print(statistics.median(map(float,sys.argv[1:])))' "$@"; }

# ratio A B: A / B with two decimals.
ratio() { $PY -c "print('%.2f' % ($1 / $2))"; }

# paired_ratios "A..." "B..." [FACTOR]: A[i] / (FACTOR x B[i]) per repeat i (runs of one repeat
# ran minutes apart at most, so slow drift of the machine cancels), as "min R  median R  max R".
paired_ratios() {
  $PY -c 'import statistics,sys
a, b = [list(map(float, x.split())) for x in sys.argv[1:3]]
f = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
r = sorted(x / (f * y) for x, y in zip(a, b))
print("min %.2f  median %.2f  max %.2f" % (r[0], statistics.median(r), r[-1]))' "$@"
}

# summary LABEL UNIT VALUE...: "LABEL  min M  median M  max M UNIT" (two decimals).
summary() {
  local label=$1 unit=$2
  shift 2
  $PY -c 'import statistics,sys; v=sorted(map(float,sys.argv[3:]))
print("%-40s min %.2f  median %.2f  max %.2f %s" % (sys.argv[1], v[0], statistics.median(v), v[-1], sys.argv[2]))' \
    "$label" "$unit" "$@"
}

# free_port: a loopback port the OS found free.
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
