#!/usr/bin/env bash
# examples/quickstart.yaml through the CLI on a coordinator and two workers: the job
# succeeds, its loss falls, and the final weights are written; `baton wait`, `jobs
# --state -o name` and `version` see it through the real coordinator.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_two_worker_cluster

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

[[ $("$BATON" wait "$JOB" --timeout 1m) == "$JOB SUCCEEDED"* ]] || fail "baton wait"
rc=0
"$BATON" wait "$JOB" --for failed --timeout 1m >/dev/null 2>&1 || rc=$?
((rc == 3)) || fail "baton wait --for failed on a succeeded job exited $rc, not 3"
[[ $("$BATON" jobs --state succeeded,FAILED -o name) == "$JOB" ]] || fail "jobs --state -o name"
[[ -z $("$BATON" jobs --state running -o name) ]] || fail "jobs --state running lists a job"
"$BATON" version -o json | json_get 'd["client"]["version"] == d["server"]["version"]' \
  | grep -qx True || fail "baton version: $("$BATON" version)"

# logs: --tail selects on the coordinator the last lines of what the other flags select,
# --since filters by the time a line was written, --timestamps shows that time.
"$BATON" logs "$JOB" >"$TMP/all.log"
"$BATON" logs "$JOB" --rank 0 >"$TMP/rank0.log"
(($(wc -l <"$TMP/rank0.log") > 3)) || fail "rank 0 wrote only $(wc -l <"$TMP/rank0.log") lines"
diff <(tail -n 3 "$TMP/rank0.log") <("$BATON" logs "$JOB" --rank 0 --tail 3) \
  || fail "logs --rank 0 --tail 3 is not the last 3 lines of rank 0"
diff <(tail -n 5 "$TMP/all.log") <("$BATON" logs "$JOB" --tail 5) \
  || fail "logs --tail 5 is not the last 5 lines"
diff "$TMP/all.log" <("$BATON" logs "$JOB" --since 1h) || fail "logs --since 1h lost lines"
[[ -z $("$BATON" logs "$JOB" --since 2099-01-01T00:00:00Z) ]] || fail "logs from the future"
"$BATON" logs "$JOB" --rank 0 --tail 2 --timestamps >"$TMP/stamped.log"
grep -Eqvx '20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z .*' "$TMP/stamped.log" \
  && { cat "$TMP/stamped.log"; fail "a line of logs --timestamps has no RFC 3339 time"; }
diff <(tail -n 2 "$TMP/rank0.log") <(cut -d' ' -f2- "$TMP/stamped.log") \
  || fail "logs --timestamps changed the lines"
rc=0
"$BATON" logs "$JOB" --tail -1 2>"$TMP/tail.err" || rc=$?
((rc == 2)) || fail "logs --tail -1 exited $rc, not 2 (usage)"

# Exit status 4: the coordinator cannot be reached (nothing listens on port 1).
rc=0
"$BATON" --coordinator 127.0.0.1:1 jobs 2>"$TMP/unreachable.err" || rc=$?
((rc == 4)) || { cat "$TMP/unreachable.err"; fail "an unreachable coordinator gave exit $rc, not 4"; }
echo "PASS"
