#!/usr/bin/env bash
# Issue 10: a worker whose advertised address its peers cannot reach (a wrong
# --advertise_host) fails the job's generation at once with the address named in
# `baton describe`, instead of the ranks hanging in their rendezvous.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
source "${TEST_SRCDIR}/baton/tests/multihost/cluster.sh"

cluster_create 3
cluster_start_coordinator
cluster_start_worker w1 1 1
cluster_start_worker w2 2 1 --advertise_host=198.18.0.99  # nobody has this address
wait_for_workers 2

cat >"$TMP/job.yaml" <<YAML
name: unreachable
command: {argv: ["/bin/sh", "-c", "sleep 600"]}
workers: {min: 2}
restart_policy: {max_infra_restarts: 1}
YAML
JOB=$("$BATON" submit "$TMP/job.yaml")
failed() { [[ $(job_state "$JOB") == JOB_STATE_FAILED ]]; }
wait_for 120 failed
"$BATON" describe "$JOB" | tee "$TMP/describe.out"
grep -q "PeerUnreachable" "$TMP/describe.out" || fail "no PeerUnreachable failure"
grep -q "cannot reach worker .* at 198.18.0.99:" "$TMP/describe.out" || fail "address not named"
echo "PASS"
