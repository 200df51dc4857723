#!/usr/bin/env bash
# No false hangs: a training job runs for SOAK_SECONDS (argument 1; the long-run target runs
# 30 minutes, CI a short one; argument 2 the contention period, 60 s) through every phase whose duration differs by orders of
# magnitude from a step — checkpoint saves (checkpoint_every), evaluation passes
# (eval_every), data epoch boundaries made slow (TRAINER_FAULT_EPOCH_DELAY, as a slow
# storage listing would make them; the first has no history, the next are learned) — and
# through CPU contention that comes and goes (two busy processes on this machine's cores,
# on for a period, off for a period). The coordinator's learned timeouts must never call any
# of it a hang: the job stays in its first generation with no restart of any class.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

SOAK_SECONDS=${1:-1800}
CONTENTION_PERIOD=${2:-60}
EPOCH_DELAY=${EPOCH_DELAY:-3s}
start_two_worker_cluster

cat >"$TMP/soak.yaml" <<YAML
name: soak
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 64, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 10, threads: 1, checkpoint_every: 300, keep_checkpoints: 2, eval_every: 700}
workers: {min: 2}
budget: {max_steps: 100000000}
checkpoint_dir: $TMP/soak-ckpt
env: {TRAINER_FAULT_EPOCH_DELAY: "$EPOCH_DELAY"}
YAML
mkdir -p "$TMP/soak-ckpt"
JOB=$("$BATON" submit "$TMP/soak.yaml")
running() { [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]]; }
wait_for 120 running

# Contention: two busy loops (as many as this machine's cores on the development VM),
# started and stopped every CONTENTION_PERIOD seconds.
BUSY=()
busy_on() {
  local n
  for n in $(seq "$(nproc)"); do
    bash -c 'while :; do :; done' &
    BUSY+=($!)
  done
}
busy_off() {
  local pid
  for pid in "${BUSY[@]}"; do kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  BUSY=()
}
CLEANUP_HOOKS+=(busy_off)

# Monitoring, not synchronisation: the soak is time passing; every second the job must
# still be RUNNING in generation 1.
start=$SECONDS
contended=0
next_toggle=$((SECONDS + CONTENTION_PERIOD))
busy_on
contended=1
while ((SECONDS - start < SOAK_SECONDS)); do
  state=$(job_state "$JOB")
  gen=$(job_field "$JOB" 'd["generation"]')
  if [[ $state != JOB_STATE_RUNNING || $gen != 1 ]]; then
    "$BATON" describe "$JOB" >&2
    fail "after $((SECONDS - start)) s the job is $state in generation $gen"
  fi
  if ((SECONDS >= next_toggle)); then
    if ((contended)); then busy_off; contended=0; else busy_on; contended=1; fi
    next_toggle=$((SECONDS + CONTENTION_PERIOD))
  fi
  sleep 1
done
busy_off

"$BATON" describe "$JOB" -o json >"$TMP/soak.json"
"$PY" - "$TMP/soak.json" "$SOAK_SECONDS" <<'PY' || fail "soak check failed"
import json, sys
d = json.load(open(sys.argv[1]))
restarts = d.get("restarts", {})
assert not restarts.get("failures"), restarts
assert int(d["generation"]) == 1, d["generation"]
steps = int(d.get("result", {}).get("steps", 0))
assert steps > 1000, steps
metrics = d.get("result", {}).get("final_metrics", {})
print(f"soak of {sys.argv[2]} s: {steps} steps (epoch {metrics.get('epoch')}), no restart")
PY
# What the soak went through: evaluations, checkpoints, epoch boundaries.
grep -h "eval_accuracy" "$TMP"/w*/jobs/*/gen-1/rank-0/stdout.log | tail -n 1 \
  || fail "no evaluation pass during the soak"
compgen -G "$TMP/soak-ckpt/ckpt-*.pt" >/dev/null || fail "no checkpoint during the soak"
epochs=$(job_field "$JOB" 'int(d.get("result", {}).get("final_metrics", {}).get("epoch", 0))')
((epochs >= 2)) || fail "only $epochs epoch boundaries: the slow boundary was not exercised"
"$BATON" cancel "$JOB" >/dev/null
echo "PASS"
