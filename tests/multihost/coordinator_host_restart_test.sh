#!/usr/bin/env bash
# Issue 10, partition case 5: every process on the coordinator's host is killed, and the
# coordinator starts again on the same state. The job running on the other hosts
# re-attaches (the workers register again, listing their ranks) and goes on: no restart,
# the same pids, and its steps keep growing. A restart takes well under the lease, so no
# worker's lease runs out.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
source "${TEST_SRCDIR}/baton/tests/multihost/cluster.sh"

cluster_create 3
make_data "$TMP/mnist"
cluster_start_coordinator 0 --worker_lease=10s
cluster_start_worker w1 1 1
cluster_start_worker w2 2 1
wait_for_workers 2

cat >"$TMP/job.yaml" <<YAML
name: outlives-coordinator
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 32, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 5, threads: 1, checkpoint_every: 50}
workers: {min: 2}
budget: {max_steps: 2000}
checkpoint_dir: $TMP/ckpt
YAML
JOB=$("$BATON" submit "$TMP/job.yaml")
running() { [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]] && (($(job_step "$JOB") > 0)); }
wait_for 120 running
read -r GEN PID0 < <(generation_and_pid "$JOB" 0)
read -r _ PID1 < <(generation_and_pid "$JOB" 1)

kill_host 0
wait "$COORDINATOR_PID" 2>/dev/null || true
cluster_start_coordinator "$COORDINATOR_PORT" --worker_lease=10s
reattached() { job_field "$JOB" '[e["reason"] for e in d["events"]]' | grep -q Reattached; }
wait_for 60 reattached
STEP=$(job_step "$JOB")
wait_for 60 job_succeeded "$JOB"
[[ $(job_field "$JOB" 'd["generation"]') == "$GEN" ]] || fail "the job restarted"
[[ $(job_field "$JOB" "sorted(r['pid'] for r in d['ranks'])") == "$(printf "['%s', '%s']" $(printf '%s\n' "$PID0" "$PID1" | sort))" ]] \
  || [[ $(job_field "$JOB" "sorted(int(r['pid']) for r in d['ranks'])") == "$(python3 -c "print(sorted([$PID0, $PID1]))")" ]] \
  || fail "the ranks changed: $(job_field "$JOB" "[r['pid'] for r in d['ranks']]")"
(($(job_step "$JOB") > STEP)) || fail "no progress after the restart"
grep -q "lease ran out" "$TMP"/w*.log && fail "a worker's lease ran out"
echo "PASS"
