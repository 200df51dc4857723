#!/usr/bin/env bash
# `baton profile` end to end: a built-in-trainer job with one rank on each of two workers;
# once it trains, `baton profile JOB --steps 2` goes CLI -> coordinator (ProfileJob) ->
# each worker (ProfileRanks: request file, SIGUSR2) -> the trainers' traces -> back, and
# writes one Chrome trace that the trace format checker accepts, with both ranks (pids 0
# and 1) and a 2-step window of each. Bad requests are refused with clear errors, and the
# job trains on.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
CHECK=$RUNFILES/worker/trainer/profile/trace_format_check.py

start_two_worker_cluster

# Trains until cancelled.
cat >"$TMP/prof.yaml" <<YAML
name: prof
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 32, lr: 0.05, seed: 7, hidden: [64, 32], log_every: 1, threads: 1}
workers: {min: 2}
budget: {max_steps: 100000000}
YAML
JOB=$("$BATON" submit "$TMP/prof.yaml")
job_trains() { [[ $(job_state "$JOB") == JOB_STATE_RUNNING && $(job_step "$JOB") -ge 1 ]]; }
wait_for 120 job_trains

"$BATON" profile "$JOB" --steps 2 --out "$TMP/trace.json" --timeout 60s >"$TMP/profile.out" \
  2>"$TMP/profile.err" || fail "baton profile failed: $(cat "$TMP/profile.err")"
grep -q "^wrote the trace of 2 steps of job $JOB generation 1, ranks 0,1, to $TMP/trace.json$" \
  "$TMP/profile.out" || fail "unexpected output: $(cat "$TMP/profile.out")"
"$PY" "$CHECK" "$TMP/trace.json" || fail "the merged trace is not a valid Chrome trace"
"$PY" - "$TMP/trace.json" <<'PY' || fail "merged trace content check failed"
import json, sys
t = json.load(open(sys.argv[1]))
events = t["traceEvents"]
spans = [e for e in events if e["ph"] == "X"]
assert {e["pid"] for e in spans} == {0, 1}, {e["pid"] for e in spans}
names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
assert sorted(names) == [0, 1] and all(names[r].startswith("rank %d" % r) for r in names), names
windows = t["otherData"]["windows"]
assert sorted(w["rank"] for w in windows) == [0, 1], windows
assert all(w["steps"] == 2 and not w["partial"] for w in windows), windows
# Both ranks recorded the same steps, each with its phases.
steps = {r: sorted({e["args"]["step"] for e in spans if e["pid"] == r and e["cat"] == "step"}) for r in (0, 1)}
assert steps[0] == steps[1] and len(steps[0]) == 2, steps
for r in (0, 1):
    phases = {e["name"] for e in spans if e["pid"] == r and e["cat"] == "step"}
    assert {"forward", "backward", "optimizer"} <= phases, (r, phases)
print("merged trace: ranks 0 and 1, steps %s" % steps[0])
PY

# Errors name what is wrong; nothing is written.
if "$BATON" profile "$JOB" --rank 5 --out "$TMP/bad.json" 2>"$TMP/rank.err"; then
  fail "--rank 5 of a 2-rank job was accepted"
fi
grep -q "ranks: 5 is outside the allowed range \[0, 2)" "$TMP/rank.err" \
  || fail "unclear error: $(cat "$TMP/rank.err")"
rc=0
"$BATON" profile "$JOB" --steps 0 2>"$TMP/steps.err" || rc=$?
[[ $rc -eq 2 ]] || fail "--steps 0 exited $rc, not 2 (usage)"
grep -q -- "--steps must be in \[1, 1000\]" "$TMP/steps.err" || fail "unclear error: $(cat "$TMP/steps.err")"
[[ ! -e "$TMP/bad.json" ]] || fail "a refused profile wrote a file"

# Profiling did not disturb the job: it is still RUNNING in generation 1.
[[ $(job_state "$JOB") == JOB_STATE_RUNNING ]] || fail "job is $(job_state "$JOB") after profiling"
[[ $(job_field "$JOB" 'd["generation"]') == 1 ]] || fail "the job restarted during profiling"
"$BATON" cancel "$JOB" >/dev/null
echo "PASS"
