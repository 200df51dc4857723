#!/usr/bin/env bash
# Issue 4, case 5: SIGTERM one worker daemon of a 3-worker job (workers.min 2), as a
# Kubernetes eviction does. The worker drains: the coordinator has rank 0 checkpoint at its
# next step boundary, stops the generation and continues at world size 2 without the
# worker, which then exits 0 by itself. No step is lost (none runs twice), every step
# trained on exactly the samples of an uninterrupted run, and the weights equal its weights
# within an fp32 tolerance (see compare_runs in lib.sh).
# With the argument "zero1" or "zero2" the drained job shards its optimizer state
# (trainer.zero.stage 1), and with zero2 its gradients too: every rank takes part in the
# checkpoint the drain asks for, the sharded checkpoint restores at the new world size, and
# the result still matches the unsharded reference.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
MODE=${1:-}

make_data "$TMP/mnist"
start_coordinator
start_worker w1
start_worker w2
start_worker w3
wait_for_workers 3

elastic_job_yaml reference 3 3 400
run_reference

elastic_job_yaml drained 2 3 400
STAGE=
if [[ $MODE == zero[12] ]]; then
  STAGE=${MODE#zero}
  zero_job_yaml drained "$STAGE"
fi
JOB=$("$BATON" submit "$TMP/drained.yaml")
drain_rank_worker "$JOB" 2 40

wait_for 120 job_succeeded "$JOB"
expect_recovered "$JOB" "$GEN" 2 planned "leaves: it is draining \(received SIGTERM\)" \
  stopped_time running_time first_step_time
grep -q "planned: *1$" "$TMP/describe.out" || fail "describe does not count the resize"
grep -q "infra: *0/" "$TMP/describe.out" || fail "a drain used the infra budget"
"$BATON" logs "$JOB" >"$TMP/logs.out"
grep -q "checkpointed: steps=" "$TMP/logs.out" \
  || fail "rank 0 did not checkpoint on request"
[[ -z $STAGE ]] || expect_zero_resize "$JOB" "$STAGE" 3 2

compare_runs reference drained no-repeats
echo "PASS"
