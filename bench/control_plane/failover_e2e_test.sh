#!/usr/bin/env bash
# The failover measurement end to end, as FAILOVER=1 run.sh runs it (failover.sh's
# functions): 20 simulated workers in 2 jobs; (1) one SQLite coordinator killed -9 and
# restarted by the script on the same port and state; (2) etcd and three replicas
# (--election_ttl=2s), the leader killed -9. In both, a coordinator serves again, every
# worker re-registers, both jobs are re-attached RUNNING in their generation (no restart)
# and then succeed; the failover takes at least the etcd lease less a renewal period.
#   args: <baton-coordinator> <load_generator> <failover.sh>
set -euo pipefail

COORDINATOR=$(realpath "$1")
GENERATOR=$(realpath "$2")
source "$3"
TMP=$(mktemp -d "${TEST_TMPDIR:-/tmp}/failover.XXXXXX")
RESULTS=$TMP/results.txt
: >"$RESULTS"
EXTRA_PIDS=()
JOB_WORKERS=10
SETTLE=500ms
cleanup() {
  local p
  for p in "${EXTRA_PIDS[@]}"; do stop_daemon "$p"; done
  true
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  tail -n 20 "$TMP"/*/err.txt "$TMP"/*/*.log >&2 || true
  exit 1
}

await_file() {
  local deadline=$((SECONDS + 30))
  until [[ -s $1 ]]; do
    kill -0 "$2" 2>/dev/null || return 1
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

# expect LINE WANT...: each WANT (key=value) is on LINE.
expect() {
  local line=$1 want
  shift
  for want in "$@"; do
    [[ " $line " == *" $want "* ]] || fail "result line lacks $want: $line"
  done
}

# value LINE KEY: KEY's value on LINE.
value() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }

restart_once 20 1
line=$(grep ' restart=1' "$RESULTS") || fail "no restart result"
expect "$line" replicas=1 workers=20 jobs=2 reregistered_workers=20 restarted_jobs=0 \
  reattached_jobs=2 leader_changed=0 failed_streams=0 ended=SUCCEEDED
awk "BEGIN{exit !($(value "$line" listening_s) > 0)}" || fail "no restart in the log: $line"

failover_once 20 1 2s
line=$(grep ' restart=0' "$RESULTS") || fail "no failover result"
expect "$line" replicas=3 workers=20 jobs=2 reregistered_workers=20 restarted_jobs=0 \
  reattached_jobs=2 leader_changed=1 failed_streams=0 ended=SUCCEEDED election_ttl_s=2
leader=$(value "$line" leader_s)
reattach=$(value "$line" reattach_s)
leading=$(value "$line" leading_s)
# etcd expires the lease ttl after the last renewal (every 0.5 s) it received.
awk "BEGIN{exit !($leader >= 1.5 && $reattach >= $leader && $leading > 0 && $leading <= $leader)}" ||
  fail "leader_s $leader, reattach_s $reattach, leading_s $leading: $line"
awk "BEGIN{exit !($(value "$line" election_retries) > 0)}" || fail "no election retries: $line"
echo PASS
