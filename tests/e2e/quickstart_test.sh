#!/usr/bin/env bash
# examples/quickstart.yaml through the CLI on a coordinator and two workers: the job
# succeeds, its loss falls, and the final weights are written.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

make_data "$TMP/mnist"
start_coordinator
start_worker w1
start_worker w2
wait_for_workers 2

"$BATON" submit "$EXAMPLES/quickstart.yaml" --set trainer.data_dir="$TMP/mnist" \
  --set checkpoint_dir="$TMP/ckpt" --set budget.max_steps=120 --wait >"$TMP/submit.out" 2>&1 \
  || { cat "$TMP/submit.out"; fail "submit --wait did not succeed"; }
cat "$TMP/submit.out"
grep -q SUCCEEDED "$TMP/submit.out" || fail "no SUCCEEDED in the CLI output"

JOB=$("$BATON" jobs -o json | json_get 'd["jobs"][0]["id"]')
[[ $(job_state "$JOB") == JOB_STATE_SUCCEEDED ]] || fail "job $JOB is $(job_state "$JOB")"
[[ $(job_field "$JOB" 'len(d["ranks"])') == 2 ]] || fail "expected 2 ranks"
[[ $(job_field "$JOB" 'int(d["result"]["steps"])') == 120 ]] || fail "expected 120 steps"
LOSS_FELL=$(job_field "$JOB" 'd["result"]["final_metrics"]["loss"] < d["result"]["initial_loss"]')
[[ $LOSS_FELL == True ]] || fail "loss did not fall: $("$BATON" describe "$JOB" -o json)"
[[ -s "$TMP/ckpt/final.pt" ]] || fail "no final checkpoint"
echo "PASS"
