#!/usr/bin/env bash
# Issue 10, partition case 3: a single-worker job (workers: {min: 1, max: 1}) whose worker
# host is cut off from everything. The cut-off rank keeps training alone until its worker's
# lease runs out; only then does the coordinator start generation 2 on the other worker.
# Never two live generations: by pid (the old rank is dead whenever the job is past its
# generation) and by the checkpoint files' generations (none of generation 1 is written
# after generation 2 started). The job then finishes, and the healed worker is READY again.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
source "${TEST_SRCDIR}/baton/tests/multihost/cluster.sh"

cluster_create 3
make_data "$TMP/mnist"
cluster_start_coordinator 0 --worker_lease=3s --worker_lease_margin=1s
cluster_start_worker w1 1 1
cluster_start_worker w2 2 1
wait_for_workers 2

cat >"$TMP/job.yaml" <<YAML
name: single
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 32, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 5, threads: 1, checkpoint_every: 20, keep_checkpoints: 1000}
workers: {min: 1, max: 1}
budget: {max_steps: 3000}
checkpoint_dir: $TMP/ckpt
YAML
submit_until_checkpoint "$TMP/job.yaml"
read -r GEN PID < <(generation_and_pid "$JOB" 0)
NAME=$(worker_name_of "$JOB" 0)
CUT=${WORKER_HOST[$NAME]}
echo "cutting host $CUT (pid $PID, generation $GEN) from everything"
watch_stale "$JOB" "$GEN" "$PID"
isolate "$CUT"

moved_on() {
  [[ $(job_field "$JOB" 'd["generation"]') -gt $GEN ]] && [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]]
}
wait_for 120 moved_on
expect_no_overlap
[[ $(host_of_rank "$JOB" 0) != "$CUT" ]] || fail "the job stayed on the cut-off host"
grep -q "lease ran out" "$TMP/$NAME.log" \
  || fail "the cut-off worker did not kill its rank when its lease ran out"
rejoin "$CUT"
wait_for 120 job_succeeded "$JOB"
wait_for 60 eval '[[ $(ready_workers) == 2 ]]'
checkpoints_fenced "$TMP/ckpt" "$JOB" "$GEN"
"$BATON" describe "$JOB"
echo "PASS"
