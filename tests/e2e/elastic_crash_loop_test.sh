#!/usr/bin/env bash
# Issue 4, case 6: a program that always crashes at step 5 fails fast as a crash loop
# (after its second failure at the same step), not after the whole user restart budget.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_coordinator
start_worker w1
wait_for_workers 1

# Reports step 5 on the metrics pipe, then crashes.
cat >"$TMP/crash.py" <<'PY'
import os, sys
os.write(int(os.environ["BATON_METRICS_FD"]), b'{"step": 5, "loss": 1.0}\n')
sys.exit(1)
PY
cat >"$TMP/job.yaml" <<YAML
name: crash-loop
command: {argv: ["$PY", "$TMP/crash.py"]}
workers: {min: 1}
restart_policy: {max_user_restarts: 10, backoff_initial: 0.1s}
YAML
rc=0
"$BATON" submit "$TMP/job.yaml" --wait >"$TMP/submit.out" 2>&1 || rc=$?
if ((rc != 3)); then  # 3: the job failed (not the CLI, not the connection)
  cat "$TMP/submit.out"
  fail "submit --wait of a crash-looping job exited $rc, not 3"
fi
JOB=$("$BATON" jobs -o json | json_get 'd["jobs"][0]["id"]')
"$BATON" describe "$JOB" >"$TMP/describe.out"
cat "$TMP/describe.out"
[[ $(job_state "$JOB") == JOB_STATE_FAILED ]] || fail "job is $(job_state "$JOB")"
[[ $(job_field "$JOB" 'd["events"][-1]["reason"]') == CrashLoop ]] || fail "not a crash loop"
job_field "$JOB" 'd["message"]' | grep -q "crash loop: generations 1 and 2 both failed at step 5" \
  || fail "message: $(job_field "$JOB" 'd["message"]')"
[[ $(job_field "$JOB" 'd["restarts"].get("user", 0)') == 1 ]] || fail "expected 1 user restart of 10"
[[ $(job_field "$JOB" 'd["generation"]') == 2 ]] || fail "expected to stop at generation 2"
[[ $(job_field "$JOB" '[int(f["step"]) for f in d["restarts"]["failures"]]') == "[5, 5]" ]] \
  || fail "failures: $(job_field "$JOB" 'd["restarts"]')"
grep -q "user:  *1/10" "$TMP/describe.out" || fail "describe does not show the user budget"
echo "PASS"
