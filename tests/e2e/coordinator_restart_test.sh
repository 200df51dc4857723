#!/usr/bin/env bash
# A coordinator killed with SIGKILL and restarted on the same state still lists every job
# with its whole history, and a job that was running re-attaches and finishes.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_coordinator
start_worker w1
start_worker w2
wait_for_workers 2

cat >"$TMP/ok.yaml" <<YAML
name: finishes
command: {argv: ["/bin/sh", "-c", "echo done"]}
workers: {min: 1}
YAML
cat >"$TMP/bad.yaml" <<YAML
name: fails
command: {argv: ["/bin/sh", "-c", "exit 3"]}
workers: {min: 1}
YAML
# Runs until the test lets it finish.
release_job_yaml "$TMP/long.yaml" outlives-coordinator
OK=$("$BATON" submit "$TMP/ok.yaml" --wait >/dev/null && "$BATON" jobs -o json | json_get 'd["jobs"][0]["id"]')
if "$BATON" submit "$TMP/bad.yaml" --wait >/dev/null 2>&1; then fail "failing job succeeded"; fi
BAD=$("$BATON" jobs -o json | json_get 'd["jobs"][0]["id"]')
LONG=$("$BATON" submit "$TMP/long.yaml")
running() { [[ $(job_state "$LONG") == JOB_STATE_RUNNING ]]; }
wait_for 60 running

BEFORE=$("$BATON" jobs -o json | json_get '[(j["id"], j["state"]) for j in d["jobs"]]')
EVENTS_BEFORE=$(job_field "$BAD" '[e["reason"] for e in d["events"]]')

kill -KILL "$COORDINATOR_PID"
wait "$COORDINATOR_PID" 2>/dev/null || true
start_coordinator "$COORDINATOR_PORT"

AFTER=$("$BATON" jobs -o json | json_get '[(j["id"], j["state"]) for j in d["jobs"]]')
[[ "$AFTER" == "$BEFORE" ]] || fail "jobs changed across the restart: $BEFORE -> $AFTER"
EVENTS_AFTER=$(job_field "$BAD" '[e["reason"] for e in d["events"]]')
[[ "$EVENTS_AFTER" == "$EVENTS_BEFORE" ]] || fail "history changed: $EVENTS_BEFORE -> $EVENTS_AFTER"
[[ $(job_state "$OK") == JOB_STATE_SUCCEEDED ]] || fail "$OK is $(job_state "$OK")"
[[ $(job_state "$BAD") == JOB_STATE_FAILED ]] || fail "$BAD is $(job_state "$BAD")"
job_field "$BAD" 'd["message"]' | grep -q "exited with code 3" || fail "failure cause lost"

# The workers reconnect on their own and the running job re-attaches, then finishes.
reattached() { job_field "$LONG" '[e["reason"] for e in d["events"]]' | grep -q Reattached; }
wait_for 60 reattached
touch "$TMP/release"
succeeded() { [[ $(job_state "$LONG") == JOB_STATE_SUCCEEDED ]]; }
wait_for 60 succeeded
echo "PASS"
