#!/usr/bin/env bash
# Issue 10: the torchrun-style PyTorch DDP example runs unchanged across two hosts (each
# worker hands PyTorch's Gloo the interface its peers reach it on).
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
source "${TEST_SRCDIR}/baton/tests/multihost/cluster.sh"

cluster_create 3
cluster_start_coordinator
cluster_start_worker w1 1 1
cluster_start_worker w2 2 1
wait_for_workers 2

"$BATON" submit "$EXAMPLES/torchrun_ddp.yaml" --wait >"$TMP/submit.out" 2>&1 \
  || { cat "$TMP/submit.out"; fail "torchrun-style job did not succeed across hosts"; }
JOB=$("$BATON" jobs -o json | json_get 'd["jobs"][0]["id"]')
[[ $(job_field "$JOB" 'len(set(r["worker_id"] for r in d["ranks"]))') == 2 ]] || fail "not on 2 hosts"
"$BATON" logs "$JOB" --rank 0 >"$TMP/logs.out"
grep -Eq "world_size=2 master=198\.18\.0\.[23]:" "$TMP/logs.out" \
  || { cat "$TMP/logs.out"; fail "no rendezvous line with a host address"; }
grep -q "done: loss" "$TMP/logs.out" || { cat "$TMP/logs.out"; fail "no final loss line"; }
echo "PASS"
