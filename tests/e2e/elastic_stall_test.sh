#!/usr/bin/env bash
# SIGSTOP one training process. Its heartbeat stops while the other rank's goes on,
# waiting for it in a collective; after stall_floor (1.5 s by default) without a heartbeat or
# progress the coordinator declares the generation hung (class stall) naming the stopped
# rank, not the one waiting for it (in the Failure record, `baton describe` and the
# event), stops it (the stopped process is SIGKILLed after the grace) and the job recovers
# from the newest checkpoint, ending with weights bit-identical to an uninterrupted run.
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
job_field "$JOB" "$F['cause']" | grep -Eq "^rank 1 on worker .* sent no heartbeat for .*: its process is not running .*rank 0 waits for it in collective #[0-9]+" \
  || fail "cause: $(job_field "$JOB" "$F['cause']")"
[[ $(job_field "$JOB" "int($F['rank'])") == 1 ]] || fail "culprit: $(job_field "$JOB" "$F")"
[[ $(job_field "$JOB" "$F['hang_evidence']") == silent ]] || fail "evidence: $(job_field "$JOB" "$F")"
[[ $(job_field "$JOB" "$F['hang_phase']") =~ ^(step|checkpoint|epoch)$ ]] || fail "phase: $(job_field "$JOB" "$F")"
grep -q "rank 1 on worker .* sent no heartbeat" "$TMP/describe.out" || fail "describe does not name rank 1"
[[ $(job_field "$JOB" "any(e.get('reason') == 'Stalled' and e.get('message', '').find('rank 1 on worker') >= 0 for e in d['events'])") == True ]] \
  || fail "no Stalled event names rank 1: $(job_field "$JOB" "[e for e in d['events'] if e.get('reason') == 'Stalled']")"
[[ $(job_field "$JOB" "int($F['next_generation'])") == $((GEN + 1)) ]] || fail "no generation change"
[[ $(job_field "$JOB" 'd["restarts"].get("stall", 0)') == 1 ]] || fail "expected 1 stall restart"
grep -q "stall: *1/3" "$TMP/describe.out" || fail "describe does not show the stall budget"
[[ $(job_field "$JOB" "all(k in $F for k in ('occurred_time', 'stopped_time', 'running_time', 'first_step_time'))") == True ]] \
  || fail "recovery phases not recorded"

# Restored at the same world size from a checkpoint: bit-identical final weights.
weights_identical reference stalled
echo "PASS"
