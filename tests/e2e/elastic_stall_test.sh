#!/usr/bin/env bash
# Issue 4, case 3: SIGSTOP one training process. No rank makes progress any more; after
# max(stall_factor x median step time, stall_floor) the coordinator declares the
# generation stalled (class stall, suspect rank named), stops it (the stopped process is
# SIGKILLed after the grace) and the job recovers from the newest checkpoint, ending with
# weights bit-identical to an uninterrupted run of the same job.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_two_worker_cluster

# job_yaml NAME: the same training job, checkpoints in $TMP/NAME-ckpt.
job_yaml() {
  cat >"$TMP/$1.yaml" <<YAML
name: $1
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 64, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 10, threads: 1, checkpoint_every: 25}
workers: {min: 2}
budget: {max_steps: 400}
checkpoint_dir: $TMP/$1-ckpt
restart_policy: {stall_floor: 2s}
YAML
  mkdir -p "$TMP/$1-ckpt"
}

# The uninterrupted reference run.
job_yaml reference
run_reference

job_yaml stalled
JOB=$("$BATON" submit "$TMP/stalled.yaml")
has_checkpoint() { compgen -G "$TMP/stalled-ckpt/ckpt-*.pt" >/dev/null; }
wait_for 60 has_checkpoint
read -r GEN PID < <(generation_and_pid "$JOB" 1)
kill -STOP "$PID" || fail "rank 1 (pid $PID) of generation $GEN was already gone"

wait_for 120 job_succeeded "$JOB"
"$BATON" describe "$JOB" >"$TMP/describe.out"
cat "$TMP/describe.out"
alive "$PID" && fail "the stopped process $PID still exists"
F="[f for f in d['restarts']['failures'] if int(f['generation']) == $GEN][0]"
[[ $(job_field "$JOB" "$F['failure_class']") == FAILURE_CLASS_STALL ]] \
  || fail "not a stall: $(job_field "$JOB" "$F")"
job_field "$JOB" "$F['cause']" | grep -Eq "no rank made progress for .* rank [01] on worker .* stopped first at step [0-9]+" \
  || fail "cause: $(job_field "$JOB" "$F['cause']")"
[[ $(job_field "$JOB" "int($F['next_generation'])") == $((GEN + 1)) ]] || fail "no generation change"
[[ $(job_field "$JOB" 'd["restarts"].get("stall", 0)') == 1 ]] || fail "expected 1 stall restart"
grep -q "stall: *1/3" "$TMP/describe.out" || fail "describe does not show the stall budget"
[[ $(job_field "$JOB" "all(k in $F for k in ('occurred_time', 'stopped_time', 'running_time', 'first_step_time'))") == True ]] \
  || fail "recovery phases not recorded"

# Restored at the same world size from a checkpoint: bit-identical final weights.
weights_identical reference stalled
echo "PASS"
