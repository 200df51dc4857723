#!/usr/bin/env bash
# The coordinator over TLS with tokens and roles, and workers with client certificates:
#  - without a valid token every JobService/ClusterService call is UNAUTHENTICATED;
#  - a viewer cannot submit; a submitter cannot cancel another user's job nor see its env
#    values; an admin can do both; every job records its owner;
#  - a worker without a CA-signed certificate cannot connect; a worker with a valid
#    certificate cannot register under another worker's id (nor replace its session);
#  - a token removed from the token file stops working on SIGHUP;
#  - plaintext (--insecure) is refused on a non-loopback address, on both ends.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

"$CERTS" "$PKI" --user alice:submitter --user bob:submitter --user vic:viewer >/dev/null
start_coordinator
start_worker w1
wait_for_workers 1

as() { local who=$1; shift; BATON_TOKEN=$(cat "$PKI/users/$who.token") "$BATON" "$@"; }

cat >"$TMP/job.yaml" <<YAML
name: secret
command: {argv: ["/bin/sleep", "1000"]}
env: {API_KEY: "k-123"}
workers: {min: 1}
YAML

# 1. No token, or a wrong one: refused, whatever the call.
for cmd in "jobs" "workers" "describe j-000001" "cancel j-000001" "logs j-000001" \
           "submit $TMP/job.yaml"; do
  rc=0
  # shellcheck disable=SC2086
  BATON_TOKEN=not-a-token "$BATON" $cmd >/dev/null 2>"$TMP/err" || rc=$?
  ((rc == 1)) || fail "'baton $cmd' with a bad token exited $rc"
  grep -q "did not accept your credentials" "$TMP/err" || fail "$cmd: $(cat "$TMP/err")"
done
rc=0
BATON_CONFIG=/dev/null "$BATON" --ca="$PKI/ca.crt" jobs 2>"$TMP/err" || rc=$?
((rc == 1)) && grep -q "no bearer token" "$TMP/err" || fail "no token: $(cat "$TMP/err")"

# 2. Roles and ownership.
rc=0
as vic submit "$TMP/job.yaml" 2>"$TMP/err" || rc=$?
((rc == 1)) && grep -q "may not submit jobs" "$TMP/err" || fail "viewer submit: $(cat "$TMP/err")"
JOB=$(as alice submit "$TMP/job.yaml")
[[ $(as vic describe "$JOB" -o json | json_get 'd["owner"]') == alice ]] ||
  fail "the job does not record its owner"
as vic jobs >/dev/null || fail "a viewer cannot list jobs"
[[ $(as alice describe "$JOB" -o json | json_get 'd["spec"]["env"]["API_KEY"]') == k-123 ]] ||
  fail "the owner does not see the env value"
for who in bob vic; do
  [[ $(as "$who" describe "$JOB" -o json | json_get 'd["spec"]["env"]["API_KEY"]') == "(hidden)" ]] ||
    fail "$who sees alice's env value"
done
as bob jobs -o json | grep -q k-123 && fail "bob sees alice's env value in the listing"
rc=0
as bob cancel "$JOB" 2>"$TMP/err" || rc=$?
((rc == 1)) && grep -q "may not cancel job $JOB of user 'alice'" "$TMP/err" ||
  fail "bob cancelled alice's job: $(cat "$TMP/err")"
[[ $(job_state "$JOB") != JOB_STATE_CANCELLED ]] || fail "the job was cancelled"
as e2e cancel "$JOB" >/dev/null || fail "an admin cannot cancel alice's job"
wait_for 30 test "$(job_state "$JOB")" == JOB_STATE_CANCELLED

# 3. Workers: only CA-signed certificates, only under their own name.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=w9 \
  -keyout "$TMP/rogue.key" -out "$TMP/rogue.crt" 2>/dev/null
"$WORKER_BIN" --coordinator="$BATON_COORDINATOR" --work_dir="$TMP/rogue" --slots=1 \
  --ca="$PKI/ca.crt" --tls_cert="$TMP/rogue.crt" --tls_key="$TMP/rogue.key" \
  --metrics_listen= 2>"$TMP/rogue.log" &
ROGUE=$!
EXTRA_PIDS+=("$ROGUE")
"$CERTS" "$PKI" --worker w2 >/dev/null
"$WORKER_BIN" --coordinator="$BATON_COORDINATOR" --work_dir="$TMP/impostor" --slots=1 \
  --ca="$PKI/ca.crt" --tls_cert="$PKI/workers/w2.crt" --tls_key="$PKI/workers/w2.key" \
  --worker_id=w1 --metrics_listen= 2>"$TMP/impostor.log" &
EXTRA_PIDS+=("$!")
wait_for 30 grep -q "does not match the worker's certificate" "$TMP/impostor.log"
# The rogue worker's handshake fails (the coordinator logs why).
wait_for 30 grep -q "certificate verify failed" "$TMP/coordinator.log"
workers=$(as vic workers -o json | json_get '",".join(sorted(w["id"] for w in d.get("workers", [])))')
[[ $workers == w1 ]] || fail "registered workers are '$workers', want only w1"
[[ $(as vic workers -o json | json_get '[w["state"] for w in d["workers"]][0]') == WORKER_STATE_READY ]] ||
  fail "the real w1 lost its session"

# 4. Revocation: drop alice's line from the token file and send SIGHUP; her token stops
# working, the others' do not.
grep -v " alice " "$PKI/tokens" >"$PKI/tokens.new" && mv "$PKI/tokens.new" "$PKI/tokens"
kill -HUP "$COORDINATOR_PID"
alice_refused() { ! as alice jobs >/dev/null 2>&1; }
wait_for 30 alice_refused
as bob jobs >/dev/null || fail "bob's token stopped working after the reload"
alive "$COORDINATOR_PID" || fail "SIGHUP stopped the coordinator"

# 5. Plaintext only on loopback, on both ends.
rc=0
"$COORDINATOR_BIN" --insecure --listen=0.0.0.0:0 --state_dir="$TMP/s2" 2>"$TMP/insecure.err" || rc=$?
((rc != 0)) && grep -q "only allowed on loopback" "$TMP/insecure.err" ||
  fail "coordinator --insecure on 0.0.0.0: rc $rc, $(cat "$TMP/insecure.err")"
rc=0
"$WORKER_BIN" --insecure --coordinator=198.18.0.1:7070 --work_dir="$TMP/w3" \
  --metrics_listen= 2>"$TMP/insecure.err" || rc=$?
((rc != 0)) && grep -q "only allowed on loopback" "$TMP/insecure.err" ||
  fail "worker --insecure to 198.18.0.1: rc $rc, $(cat "$TMP/insecure.err")"
rc=0
"$BATON" --insecure --coordinator=198.18.0.1:7070 jobs 2>"$TMP/insecure.err" || rc=$?
((rc == 2)) && grep -q "only allowed on loopback" "$TMP/insecure.err" ||
  fail "baton --insecure to 198.18.0.1: rc $rc, $(cat "$TMP/insecure.err")"
echo PASS
