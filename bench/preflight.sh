#!/usr/bin/env bash
# What the pre-flight check adds to a job's start, at 8 hosts. A coordinator and eight
# single-slot workers on separate hosts of the multi-host harness (tests/multihost/
# cluster.sh: network namespaces joined by a bridge). Each round submits the same 8-worker
# job twice, once with the check (the default: shared memory on each host, each host
# streaming 200 ms to its next two in a ring) and once with `preflight: {skip: true}`, in
# alternating order, and reads from the job's events the time from its placement
# (QUEUED -> RENDEZVOUS) to RUNNING (every process of every worker spawned). Prints
# min/median/max seconds for both, the check's own duration (its event), and last
#   added=<median with - median without>  budget_ratio=<added / 2 s>
# The jobs exit at once; a false alarm (a host called slow or failing on this idle
# cluster) is counted and printed: it should be 0.
#
# Usage: bench/preflight.sh [ROUNDS=5] [HOSTS=8]. Needs root (namespaces) and nft.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
HOSTS=${2:-8}
PY=/usr/bin/python3
source bench/lib.sh
build_targets //coordinator:baton-coordinator //worker:baton-worker \
  //worker/trainer:baton-trainer //client:baton

# Every host has a private /tmp: the work directory must be elsewhere.
TEST_TMPDIR=$(mktemp -d /var/tmp/baton-preflight-bench.XXXXXX)
export TEST_TMPDIR
source tests/e2e/lib.sh
COORDINATOR_BIN=$BIN/coordinator/baton-coordinator
WORKER_BIN=$BIN/worker/baton-worker
TRAINER_BIN=$BIN/worker/trainer/baton-trainer
BATON=$BIN/client/baton
source tests/multihost/cluster.sh
remove_workdir() { rm -rf "$TEST_TMPDIR"; }
cluster_create $((HOSTS + 1))
CLEANUP_HOOKS+=(remove_workdir)
# A mark would keep a host out of the next rounds' gangs: let it lapse at once (a false
# alarm is still counted from the job's events).
cluster_start_coordinator 0 --unhealthy_recheck_after=1ms
for ((i = 1; i <= HOSTS; i++)); do cluster_start_worker "w$i" "$i" 1; done
wait_for_workers "$HOSTS"

# run_job SKIP: one job; prints "<placement -> RUNNING seconds> <check seconds or -> <bad>".
run_job() {
  cat >"$TMP/job.yaml" <<YAML
name: preflight-bench
command: {argv: ["/bin/sh", "-c", "exit 0"]}
workers: {min: $HOSTS}
preflight: {skip: $1}
YAML
  "$BATON" submit "$TMP/job.yaml" --wait >/dev/null
  local id
  id=$("$BATON" jobs -o json | json_get 'd["jobs"][0]["id"]')
  "$BATON" describe "$id" -o json | "$PY" -c '
import json, re, sys
from datetime import datetime
d = json.load(sys.stdin)
def t(e):
    return datetime.fromisoformat(e["time"].rstrip("Z")[:26]).timestamp()
ev = d["events"]
placed = [t(e) for e in ev if e.get("to_state") == "JOB_STATE_RENDEZVOUS"][-1]
running = [t(e) for e in ev if e.get("to_state") == "JOB_STATE_RUNNING"][-1]
check = [e["message"] for e in ev if e["reason"] == "Preflight"]
took = "-"
if check:
    m = re.search(r"checked in ([0-9.]+)(ms|s)", check[0])
    took = "%.3f" % (float(m.group(1)) / (1000 if m.group(2) == "ms" else 1))
bad = sum(1 for e in ev if e["reason"] in ("PreflightWarning", "PreflightExcluded"))
print("%.3f %s %d" % (running - placed, took, bad))'
}

: >"$TMP/with"
: >"$TMP/without"
for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then order=(false true); else order=(true false); fi
  for skip in "${order[@]}"; do
    line=$(run_job "$skip")
    if [[ $skip == false ]]; then echo "$line" >>"$TMP/with"; else echo "$line" >>"$TMP/without"; fi
    echo "round $r skip=$skip: $line" >&2
  done
done
"$PY" - "$TMP/with" "$TMP/without" "$HOSTS" <<'PY'
import statistics, sys
def rows(path):
    return [l.split() for l in open(path) if l.strip()]
w, wo, hosts = rows(sys.argv[1]), rows(sys.argv[2]), sys.argv[3]
def mmm(xs):
    return "min %.3f median %.3f max %.3f" % (min(xs), statistics.median(xs), max(xs))
start_w = [float(r[0]) for r in w]
start_wo = [float(r[0]) for r in wo]
print("hosts=%s rounds=%d" % (hosts, len(w)))
print("placement -> RUNNING with the check (s):    %s" % mmm(start_w))
print("placement -> RUNNING without (skip) (s):    %s" % mmm(start_wo))
print("the check's own duration (s):              %s" % mmm([float(r[1]) for r in w]))
print("false alarms (hosts called slow or failing): %d" % sum(int(r[2]) for r in w))
added = statistics.median(start_w) - statistics.median(start_wo)
print("added=%.3f budget_ratio=%.3f" % (added, added / 2.0))
PY
