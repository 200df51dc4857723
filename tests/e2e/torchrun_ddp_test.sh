#!/usr/bin/env bash
# A plain torchrun-style PyTorch DDP script runs unchanged under Baton on two workers.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_coordinator
start_worker w1
start_worker w2
wait_for_workers 2

"$BATON" submit "$EXAMPLES/torchrun_ddp.yaml" --wait >"$TMP/submit.out" 2>&1 \
  || { cat "$TMP/submit.out"; fail "torchrun-style job did not succeed"; }
JOB=$("$BATON" jobs -o json | json_get 'd["jobs"][0]["id"]')
[[ $(job_state "$JOB") == JOB_STATE_SUCCEEDED ]] || fail "job is $(job_state "$JOB")"
# Both ranks exited 0; rank 0 saw torchrun's environment (it prints it) and its loss fell.
[[ $(job_field "$JOB" 'sum(1 for r in d["ranks"] if r.get("exit", {}).get("exit_code", 0) == 0 and "exit" in r)') == 2 ]] \
  || fail "not every rank exited 0"
"$BATON" logs "$JOB" --rank 0 >"$TMP/logs.out"
grep -q "world_size=2 master=" "$TMP/logs.out" || { cat "$TMP/logs.out"; fail "no rendezvous line"; }
grep -q "done: loss" "$TMP/logs.out" || { cat "$TMP/logs.out"; fail "no final loss line"; }
# It reported every step through the helper (client/python), and the result shows them.
grep -q "steps: *126/126" "$TMP/submit.out" || { cat "$TMP/submit.out"; fail "the result shows no steps"; }
echo "PASS"
