#!/usr/bin/env bash
# Issue 4, case 4: a worker joins a running 2-worker job with workers.max 3. The
# coordinator has rank 0 checkpoint at its next step boundary and re-rendezvouses with
# the larger world. No step is lost (none runs twice), every step trained on exactly the
# samples of an uninterrupted run (the global batch is fixed), and the weights equal its
# weights within an fp32 tolerance (see compare_runs in lib.sh).
# With the argument "zero2" the growing job shards its optimizer state and gradients
# (trainer.zero.stage 2): the sharded checkpoint taken at world size 2 is re-cut for 3, and
# the result still matches the unsharded, uninterrupted reference.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
MODE=${1:-}

start_two_worker_cluster

elastic_job_yaml reference 2 2 600
run_reference

elastic_job_yaml grown 2 3 600
[[ $MODE != zero2 ]] || zero_job_yaml grown 2
JOB=$("$BATON" submit "$TMP/grown.yaml")
past_step() { (($(job_step "$JOB") >= $1)); }
wait_for 60 past_step 30
GEN=$(job_field "$JOB" 'd["generation"]')
[[ $(job_field "$JOB" 'len(d["ranks"])') == 2 ]] || fail "expected world size 2 first"
start_worker w3

wait_for 120 job_succeeded "$JOB"
expect_recovered "$JOB" "$GEN" 3 planned "can join: growing from 2 to 3 workers" \
  stopped_time running_time first_step_time
grep -q "planned: *1$" "$TMP/describe.out" || fail "describe does not count the resize"
[[ $MODE != zero2 ]] || expect_zero_resize "$JOB" 2 2 3

compare_runs reference grown no-repeats
echo "PASS"
