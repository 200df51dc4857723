#!/usr/bin/env bash
# Issue 10, partition case 4: the coordinator's host cut from every worker.
# * For less than the lease: training goes on undisturbed, nothing restarts (same
#   generation, same pids, steps keep growing).
# * For longer than the lease: every worker kills its ranks when its lease runs out, the
#   coordinator counts the workers lost; once the network is back they register again and
#   the job resumes from its checkpoint as a new generation and finishes.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
source "${TEST_SRCDIR}/baton/tests/multihost/cluster.sh"

LEASE=6
cluster_create 3
make_data "$TMP/mnist"
cluster_start_coordinator 0 --worker_lease=${LEASE}s --worker_lease_margin=1s
cluster_start_worker w1 1 1
cluster_start_worker w2 2 1
wait_for_workers 2

cat >"$TMP/job.yaml" <<YAML
name: coordinator-cut
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 32, global_batch: 64, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 5, threads: 1, checkpoint_every: 25, keep_checkpoints: 1000}
workers: {min: 2}
budget: {max_steps: 100000}
checkpoint_dir: $TMP/ckpt
YAML
submit_until_checkpoint "$TMP/job.yaml"
read -r GEN PID0 < <(generation_and_pid "$JOB" 0)
read -r _ PID1 < <(generation_and_pid "$JOB" 1)

# Short: a sixth of the lease, so that TCP's retransmission backoff after the heal (the
# heartbeats queued during the outage arrive up to a few seconds late) stays well inside
# the lease. (The sleep is the length of the outage, not a wait.)
isolate 0
sleep $((LEASE / 6))
rejoin 0
STEP=$(job_step "$JOB")
progressed() { (($(job_step "$JOB") > STEP + 20)); }
wait_for 60 progressed
[[ $(job_field "$JOB" 'd["generation"]') == "$GEN" ]] || fail "a short outage restarted the job"
[[ $(job_field "$JOB" 'd["restarts"].get("infra", 0)') == 0 ]] || fail "restarts counted"
alive "$PID0" && alive "$PID1" || fail "a rank was stopped by a short outage"
grep -q "lease ran out" "$TMP"/w*.log && fail "a worker's lease ran out in a short outage"
echo "short outage: generation $GEN and pids $PID0 $PID1 unchanged, step $STEP -> $(job_step "$JOB")"

# Long: twice the lease. The ranks stop on their own, without the coordinator.
isolate 0
stopped() { ! alive "$PID0" && ! alive "$PID1"; }
wait_for 60 stopped
# The first lease to run out kills its rank; the other rank may die of its peer's death
# before its own worker's lease runs out (then there is nothing left for that lease to kill).
grep -q "lease ran out" "$TMP/w1.log" || grep -q "lease ran out" "$TMP/w2.log" \
  || fail "no worker killed its ranks on its lease"
sleep "$LEASE"  # the outage goes on past the lease and its margin on the coordinator's side
rejoin 0
resumed() {
  [[ $(job_field "$JOB" 'd["generation"]') -gt $GEN ]] && [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]] \
    && [[ $(job_field "$JOB" "[f for f in d['restarts']['failures'] if int(f['generation']) == $GEN][0].get('resumed_step', -1)") -gt 0 ]]
}
wait_for 120 resumed
F="[f for f in d['restarts']['failures'] if int(f['generation']) == $GEN][0]"
[[ $(job_field "$JOB" "$F['reason']") == LeaseExpired ]] || fail "$(job_field "$JOB" "$F")"
"$BATON" describe "$JOB"
"$BATON" cancel "$JOB" >/dev/null
checkpoints_fenced "$TMP/ckpt" "$JOB" "$GEN"
echo "PASS"
