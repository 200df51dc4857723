#!/usr/bin/env bash
# No acknowledged submit is lost through leader failovers: baton.client (given every
# replica's address) submits in a loop, each job with its own request id, retrying a submit
# that failed with the same id, while the leading replica is SIGKILLed 20 times (each time
# after a few more acknowledged submits) and restarted as a standby. Afterwards every
# acknowledged job exists, exactly once per request id, with the id it was acknowledged
# with.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_etcd
COORDINATOR_FLAGS=(--election_ttl=2s --max_jobs_per_user=0)
start_replicas a b c

PYTHONPATH=$RUNFILES/client/python/package "$PY" -B - "$TMP" "${REPLICA_PORTS[a]}" \
  "${REPLICA_PORTS[b]}" "${REPLICA_PORTS[c]}" <<'PY' >"$TMP/submits.out" 2>"$TMP/submits.log" &
import os, sys, time
from baton import client as bc

deadline = time.monotonic() + 280
tmp, ports = sys.argv[1], sys.argv[2:]
client = bc.Client(",".join("127.0.0.1:" + p for p in ports), timeout=5, retries=1000,
                   backoff=0.05, max_backoff=0.5)
spec = {"name": "submit-loop", "command": {"argv": ["/bin/true"]}, "workers": {"min": 1}}
acked = {}
i = 0
while not os.path.exists(os.path.join(tmp, "kills-done")):
    assert time.monotonic() < deadline, "the kills did not finish in time"
    i += 1
    request_id = "req-%d" % i
    while True:
        try:
            job = client.submit(spec, request_id=request_id)
            break
        except bc.BatonError as e:  # Unavailable beyond the client's retries: again
            print("retrying %s: %s" % (request_id, e), file=sys.stderr)
            time.sleep(0.05)
    acked[request_id] = job.id
    with open(os.path.join(tmp, "acked.tmp"), "w") as f:
        f.write(str(len(acked)))
    os.replace(os.path.join(tmp, "acked.tmp"), os.path.join(tmp, "acked"))
for request_id, job_id in sorted(acked.items()):
    print(request_id, job_id)
PY
SUBMITTER=$!
EXTRA_PIDS+=("$SUBMITTER")

acked() { cat "$TMP/acked" 2>/dev/null || echo 0; }
for kill in $(seq 20); do
  want=$(($(acked) + 1 + RANDOM % 5))
  enough() { (($(acked) >= want)); }
  wait_for 60 enough
  name=$(leader_name)
  kill -KILL "${REPLICA_PIDS[$name]}"
  wait "${REPLICA_PIDS[$name]}" 2>/dev/null || true
  other() { local n; n=$(leader_name) && [[ $n != "$name" ]]; }
  wait_for 30 other
  start_replica "$name" "${REPLICA_PORTS[$name]}"
  echo "kill $kill: $name (after $(acked) acknowledged submits); $(leader_name) leads"
done
touch "$TMP/kills-done"
wait "$SUBMITTER" || fail "the submit loop failed: $(tail -5 "$TMP/submits.log")"

# Every acknowledged (request id, job id) exists, once.
PYTHONPATH=$RUNFILES/client/python/package "$PY" -B - "$TMP/submits.out" <<'PY' || fail "acknowledged submits were lost or duplicated"
import collections, os, sys
from baton import client as bc
acked = dict(line.split() for line in open(sys.argv[1]))
jobs = list(bc.Client(os.environ["BATON_COORDINATOR"]).jobs())
by_request = collections.defaultdict(list)
for job in jobs:
    by_request[job.request_id].append(job.id)
lost = [r for r in acked if r not in by_request]
twice = {r: ids for r, ids in by_request.items() if len(ids) > 1}
moved = {r: (acked[r], by_request[r]) for r in acked if by_request.get(r, [acked[r]]) != [acked[r]]}
print("%d acknowledged submits, %d jobs" % (len(acked), len(jobs)))
assert len(acked) >= 20, "too few submits: %d" % len(acked)
assert not lost, "lost: %s" % lost[:10]
assert not twice, "created twice: %s" % list(twice.items())[:10]
assert not moved, "acknowledged with another id: %s" % list(moved.items())[:10]
PY
echo "PASS"
