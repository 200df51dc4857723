#!/usr/bin/env bash
# Issue 10: the built-in trainer across separate hosts. A coordinator on host 0 and workers
# on hosts 1-3 (2 slots each) that were told nothing about addresses: each advertises the
# source address of its route to the coordinator and hands its interface to Gloo. World
# size 6 trains (the hierarchical all-reduce: shared memory inside a host, Gloo between
# the 3 leaders) and its loss falls; its final weights match the same job on ONE host
# (6 ranks, same global batch) within an fp32 tolerance, since the ranks' gradients are
# summed in another order; world size 2 on two hosts (one rank each) sums a + b like
# world size 2 on one host, so those final weights are bit-identical.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
source "${TEST_SRCDIR}/baton/tests/multihost/cluster.sh"

cluster_create 5
make_data "$TMP/mnist"
cluster_start_coordinator

# job_yaml NAME SLOTS_PER_WORKER WORKERS: the same training run for every layout.
job_yaml() {
  cat >"$TMP/$1.yaml" <<YAML
name: $1
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 16, global_batch: 96, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 5, threads: 1}
workers: {min: $3}
slots_per_worker: $2
budget: {max_steps: 60}
checkpoint_dir: $TMP/$1-ckpt
YAML
}
run_job() {
  "$BATON" submit "$TMP/$1.yaml" --wait >"$TMP/$1.out" 2>&1 \
    || { cat "$TMP/$1.out"; fail "job $1 did not succeed"; }
  JOB=$("$BATON" jobs -o json | json_get 'd["jobs"][0]["id"]')
}
# hosts_of JOB: the distinct worker hosts of the job's ranks.
hosts_of() { job_field "$1" 'sorted(set(r["worker_id"] for r in d["ranks"]))'; }

# References on one host: a single worker with 6 slots (host 4).
cluster_start_worker big 4 6
wait_for_workers 1
job_yaml one-host-6 6 1
run_job one-host-6
[[ $(job_field "$JOB" 'len(d["ranks"])') == 6 ]] || fail "expected 6 ranks on one host"
job_yaml one-host-2 2 1
run_job one-host-2
kill -INT "${WORKER_PIDS[big]}"
wait "${WORKER_PIDS[big]}" || fail "worker big did not stop cleanly"
unset 'WORKER_PIDS[big]'

for i in 1 2 3; do cluster_start_worker "w$i" "$i" 2; done
wait_for_workers 3
# Each worker found its own address: its host's, not a loopback one.
"$BATON" workers -o json | json_get 'sorted(w["host"] for w in d["workers"] if w["state"] == "WORKER_STATE_READY")' \
  >"$TMP/hosts.out"
[[ $(cat "$TMP/hosts.out") == "['198.18.0.2', '198.18.0.3', '198.18.0.4']" ]] \
  || fail "advertised hosts: $(cat "$TMP/hosts.out")"
grep -q "training traffic on eth0" "$TMP/w1.log" || fail "w1 did not pick eth0"

job_yaml three-hosts 2 3
run_job three-hosts
[[ $(job_field "$JOB" 'len(d["ranks"])') == 6 ]] || fail "expected world size 6"
[[ $(job_field "$JOB" 'len(set(r["worker_id"] for r in d["ranks"]))') == 3 ]] || fail "not on 3 hosts"
[[ $(job_field "$JOB" 'd["master_addr"]') == 198.18.0.* ]] || fail "MASTER_ADDR $(job_field "$JOB" 'd["master_addr"]')"
[[ $(job_field "$JOB" 'd["result"]["final_metrics"]["loss"] < d["result"]["initial_loss"]') == True ]] \
  || fail "loss did not fall: $("$BATON" describe "$JOB")"
"$BATON" logs "$JOB" --rank 0 >"$TMP/three-hosts.log"
grep -q "on cpu (hierarchical(shm+gloo, 3 hosts))" "$TMP/three-hosts.log" \
  || fail "3 hosts x 2 ranks did not use the hierarchical all-reduce: $(grep 'on cpu' "$TMP/three-hosts.log")"

job_yaml two-hosts 1 2
run_job two-hosts
[[ $(job_field "$JOB" 'len(set(r["worker_id"] for r in d["ranks"]))') == 2 ]] || fail "not on 2 hosts"

"$PY" - "$TMP" <<'PY'
import sys, torch
tmp = sys.argv[1]
def load(name):
    return torch.load("%s/%s-ckpt/final.pt" % (tmp, name))
def max_diff(a, b):
    assert sorted(a) == sorted(b)
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)
d = max_diff(load("one-host-6"), load("three-hosts"))
print("world size 6, 3 hosts vs 1 host, 60 steps: max |weight difference| %.3g (tolerance 1e-4)" % d)
assert d <= 1e-4, d
a, b = load("one-host-2"), load("two-hosts")
bad = [k for k in a if not torch.equal(a[k], b[k])]
assert not bad, "world size 2 on 2 hosts differs from 1 host: %s" % bad
print("world size 2, 2 hosts vs 1 host: final weights bit-identical (%d tensors)" % len(a))
PY
echo "PASS"
