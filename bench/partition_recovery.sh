#!/usr/bin/env bash
# Recovery from a worker-host partition, by phase. A coordinator and three single-slot
# workers on separate hosts of the multi-host harness (tests/multihost/cluster.sh); an
# elastic MLP job (workers 2..3, global batch 96, a checkpoint every 50 steps). Each round
# cuts the host of rank 1 off from every other host at a random moment, waits until the
# job trains again on the other two, heals the partition and waits until the job has grown
# back to three workers. The phases come from the coordinator's Failure record:
#   detect     last heartbeat -> the worker counted lost: lease + margin, by design (its
#              processes may run until its lease has certainly run out)
#   stop       -> the survivors' exits (they are killed at once: they wait on the lost peer)
#   backoff    -> the next rendezvous (the restart policy's first backoff, 0.5 s)
#   rendezvous -> every process of the next generation running
#   restore    -> its first step (checkpoint restore, store connect, a step)
#   total      last heartbeat -> first step
# Prints min/median/max seconds per phase, and last `ratio=<median total / (lease + margin)>`:
# how far recovery stays above the floor that split-brain safety sets. No baseline runs
# beside it: torchrun has no partition handling to compare with (its agents lose their
# rendezvous and the job stops); the floor is the comparison.
#
# Usage: bench/partition_recovery.sh [ROUNDS=3] [LEASE=10s] [MARGIN=1s]
# Needs root (namespaces) and nft.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
LEASE=${2:-10s}
MARGIN=${3:-1s}
PY=/usr/bin/python3
TARGETS=(//coordinator:baton-coordinator //worker:baton-worker //worker/trainer:baton-trainer
  //client:baton //tools:make_mnist)
if ! build_log=$(bazel build "${TARGETS[@]}" 2>&1); then
  echo "$build_log" | tail -30 >&2
  exit 1
fi
BIN=$(bazel info bazel-bin 2>/dev/null)

# Every host has a private /tmp: the work directory must be elsewhere.
TEST_TMPDIR=$(mktemp -d /var/tmp/baton-partition-bench.XXXXXX)
export TEST_TMPDIR
source tests/e2e/lib.sh
COORDINATOR_BIN=$BIN/coordinator/baton-coordinator
WORKER_BIN=$BIN/worker/baton-worker
TRAINER_BIN=$BIN/worker/trainer/baton-trainer
BATON=$BIN/client/baton
source tests/multihost/cluster.sh
remove_workdir() { rm -rf "$TEST_TMPDIR"; }
cluster_create 4
CLEANUP_HOOKS+=(remove_workdir)
"$BIN/tools/make_mnist" --out_dir="$TMP/mnist" --train_size=12000 --test_size=100 >/dev/null
cluster_start_coordinator 0 --worker_lease="$LEASE" --worker_lease_margin="$MARGIN"
for i in 1 2 3; do cluster_start_worker "w$i" "$i" 1; done
wait_for_workers 3

cat >"$TMP/job.yaml" <<YAML
name: partition-bench
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 32, global_batch: 96, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 5, threads: 1, checkpoint_every: 50}
workers: {min: 2, max: 3}
budget: {max_steps: 100000000}
restart_policy: {max_infra_restarts: 100}
checkpoint_dir: $TMP/ckpt
YAML
JOB=$("$BATON" submit "$TMP/job.yaml")
training_on() {  # training_on N: RUNNING at world size N with a step reported
  [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]] && [[ $(job_field "$JOB" 'len(d["ranks"])') == "$1" ]] \
    && [[ $(job_field "$JOB" "[f for f in d['restarts']['failures'] if int(f['next_generation']) == int(d['generation'])][0].get('first_step_time', '') != '' if d['restarts'].get('failures') else int(d.get('result', {}).get('steps', 0)) > 0") == True ]]
}
wait_for 300 training_on 3
for ((round = 1; round <= ROUNDS; round++)); do
  sleep "$($PY -c 'import random; print(random.uniform(1, 4))')"  # a random moment
  GEN=$(job_field "$JOB" 'd["generation"]')
  CUT=$(host_of_rank "$JOB" 1)
  isolate "$CUT"
  recovered() { (($(job_field "$JOB" 'd["generation"]') > GEN)) && training_on 2; }
  wait_for 300 recovered
  "$BATON" describe "$JOB" -o json >"$TMP/round-$round.json"
  echo "round $round: generation $GEN, host $CUT cut off; recovered at world size 2" >&2
  rejoin "$CUT"
  wait_for 300 training_on 3
done
"$BATON" cancel "$JOB" >/dev/null

"$PY" - "$TMP" "$ROUNDS" "$LEASE" "$MARGIN" <<'PY'
import json, re, statistics, sys
from datetime import datetime, timezone
tmp, rounds = sys.argv[1], int(sys.argv[2])
def seconds(d):
    return sum(float(v) * {"ms": 1e-3, "s": 1, "m": 60}[u] for v, u in re.findall(r"([\d.]+)(ms|s|m)", d))
floor = seconds(sys.argv[3]) + seconds(sys.argv[4])
def t(s):
    whole, _, frac = s.rstrip("Z").partition(".")
    return (datetime.fromisoformat(whole).replace(tzinfo=timezone.utc).timestamp()
            + float("0." + (frac or "0")))
phases = {k: [] for k in ("detect", "stop", "backoff", "rendezvous", "restore", "total")}
for r in range(1, rounds + 1):
    job = json.load(open("%s/round-%d.json" % (tmp, r)))
    f = [f for f in job["restarts"]["failures"] if f.get("reason") == "LeaseExpired"][-1]
    ts = [t(f[k]) for k in ("occurred_time", "fail_time", "stopped_time", "rendezvous_time",
                            "running_time", "first_step_time")]
    for k, a, b in zip(phases, ts, ts[1:]):
        phases[k].append(b - a)
    phases["total"].append(ts[-1] - ts[0])
print("worker-host partition -> first step after recovery, seconds over %d rounds "
      "(lease %s + margin %s = %.1f s floor):" % (rounds, sys.argv[3], sys.argv[4], floor))
for k, v in phases.items():
    print("  %-10s min %6.3f  median %6.3f  max %6.3f" % (k, min(v), statistics.median(v), max(v)))
print("ratio=%.2f" % (statistics.median(phases["total"]) / floor))
PY
