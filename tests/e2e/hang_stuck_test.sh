#!/usr/bin/env bash
# A rank that hangs while its process runs — its training thread blocked for good before a
# step, as a deadlock or a hung device leaves it (TRAINER_FAULT_HANG), its heartbeat going
# on — while the other rank waits for it in the step's all-reduce: the coordinator names the
# stuck rank, not the waiting one, once it has been in its step for stall_floor +
# stall_factor x its longest recent step, and the job restarts from its checkpoint.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_two_worker_cluster
cat >"$TMP/job.yaml" <<YAML
name: stuck
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 64, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 10, threads: 1, checkpoint_every: 50}
workers: {min: 2}
budget: {max_steps: 100000}
checkpoint_dir: $TMP/ckpt
env: {TRAINER_FAULT_HANG: "1:300"}
restart_policy: {max_stall_restarts: 0}
YAML
mkdir -p "$TMP/ckpt"
JOB=$("$BATON" submit "$TMP/job.yaml")
failed() { [[ $(job_state "$JOB") == JOB_STATE_FAILED ]]; }
wait_for 180 failed
"$BATON" describe "$JOB" >"$TMP/describe.out"
F="d['restarts']['failures'][0]"
[[ $(job_field "$JOB" "$F['failure_class']") == FAILURE_CLASS_STALL ]] || fail "$(job_field "$JOB" "$F")"
[[ $(job_field "$JOB" "int($F['rank'])") == 1 ]] || fail "culprit: $(job_field "$JOB" "$F")"
[[ $(job_field "$JOB" "$F['hang_evidence']") == stuck ]] || fail "evidence: $(job_field "$JOB" "$F")"
[[ $(job_field "$JOB" "$F['hang_phase']") == step ]] || fail "phase: $(job_field "$JOB" "$F")"
job_field "$JOB" "$F['cause']" | grep -Eq "^rank 1 on worker w[12] stuck in step for [0-9.]+m?s at step 299 \(timeout [0-9.]+m?s = 1.5s \+ 3 x [0-9.]+ms, its longest recent step\); rank 0 waits for it in collective #[0-9]+" \
  || fail "cause: $(job_field "$JOB" "$F['cause']")"
grep -q "rank 1 on worker .* stuck in step" "$TMP/describe.out" || fail "describe does not name rank 1"
echo "PASS"
