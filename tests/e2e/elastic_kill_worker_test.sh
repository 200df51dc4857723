#!/usr/bin/env bash
# Issue 4, case 2: SIGKILL one worker daemon of a 3-worker job with workers.min 2. Its
# processes die with it (the shim), the coordinator sees the stream close (class infra),
# and generation 2 continues at world size 2 with the same global batch from the newest
# checkpoint. The steps since that checkpoint are redone; in the end every step trained on
# exactly the samples of an uninterrupted run, and the weights equal its weights within an
# fp32 tolerance (3 ranks and 2 ranks sum the gradients in another order; see compare_runs
# in lib.sh).
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

make_data "$TMP/mnist"
start_coordinator
start_worker w1
start_worker w2
start_worker w3
wait_for_workers 3

elastic_job_yaml reference 3 3 300
run_reference

elastic_job_yaml killed 2 3 300
JOB=$("$BATON" submit "$TMP/killed.yaml")
has_checkpoint() { compgen -G "$TMP/killed-ckpt/ckpt-*.pt" >/dev/null; }
wait_for 60 has_checkpoint
[[ $(job_field "$JOB" 'len(d["ranks"])') == 3 ]] || fail "expected world size 3 first"
GEN=$(job_field "$JOB" 'd["generation"]')
WORKER=$(worker_pid_of "$JOB" 1)
kill -KILL "$WORKER"

wait_for 120 job_succeeded "$JOB"
expect_recovered "$JOB" "$GEN" 2 infra "lost: its stream closed" \
  occurred_time stopped_time running_time first_step_time
grep -q "infra: *1/" "$TMP/describe.out" || fail "describe does not show the infra budget"

compare_runs reference killed
echo "PASS"
