#!/usr/bin/env bash
# Coordinator replicas on etcd, the leader's host cut from etcd's host only (nftables);
# workers still reach the leader. The leader stops leading within its etcd lease (it exits,
# closing its streams), writes nothing after the cut (etcd's revision history shows no change
# between the cut and the standby's election but the expiry of the old leader key), the
# standby leads, the workers re-attach there, and the running job is never decided twice:
# same generation, same rank processes, no failure; it succeeds once released.
#
# Hosts: 0 etcd and replica B (and the CLI), 1 replica A (the first leader), 2 and 3 workers.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
source "${TEST_SRCDIR}/baton/tests/multihost/cluster.sh"

cluster_create 4
[[ $TMP != /tmp/* ]] || fail "TMP ($TMP) is under /tmp, which every host has privately"
ETCD=${HOST_ADDR[0]}:2379
(on_exec 0 /usr/bin/etcd --name=m0 --data-dir="$TMP/etcd" --listen-client-urls="http://$ETCD" \
  --advertise-client-urls="http://$ETCD" --listen-peer-urls=http://127.0.0.1:2380 \
  --initial-advertise-peer-urls=http://127.0.0.1:2380 --initial-cluster=m0=http://127.0.0.1:2380 \
  --logger=zap --log-level=warn 2>>"$TMP/etcd.log") &
EXTRA_PIDS+=($!)
etcdctl_() { on 0 env ETCDCTL_API=3 /usr/bin/etcdctl --endpoints="$ETCD" "$@"; }
wait_for 30 etcdctl_ endpoint health

# One certificate for both replicas' addresses (replacing lib.sh's loopback one).
rm -f "$PKI/coordinator.crt"
"$CERTS" "$PKI" --coordinator-san "DNS:localhost,IP:127.0.0.1,IP:${HOST_ADDR[0]},IP:${HOST_ADDR[1]}" >/dev/null
start_replica_on() {  # NAME HOST
  (on_exec "$2" "$COORDINATOR_BIN" --store="etcd://$ETCD/mh" --listen="${HOST_ADDR[$2]}:7070" \
    "${COORDINATOR_TLS[@]}" --metrics_listen= --state_dir="$TMP/$1" --worker_lease=10s \
    --stop_grace=2s --reattach_timeout=20s 2>>"$TMP/$1.log") &
  REPLICA_PID[$1]=$!
}
declare -A REPLICA_PID=()
leader() { etcdctl_ get --print-value-only /mh/leader; }
start_replica_on a 1
a_leads() { [[ $(leader) == "${HOST_ADDR[1]}:7070" ]]; }
wait_for 30 a_leads
start_replica_on b 0
export BATON_COORDINATOR=${HOST_ADDR[1]}:7070,${HOST_ADDR[0]}:7070
cluster_start_worker w1 2 1
cluster_start_worker w2 3 1
wait_for_workers 2

release_job_yaml "$TMP/long.yaml" leader-cut-from-etcd
JOB=$("$BATON" submit "$TMP/long.yaml")
running() { [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]]; }
wait_for 60 running
BEFORE=$(generation_and_pid "$JOB" 0; generation_and_pid "$JOB" 1)

REV=$(etcdctl_ get /mh/leader -w json | json_get 'd["header"]["revision"]')
cut 1 0
# A stops leading on its own (it cannot renew its lease) and exits; B leads.
a_gone() { ! alive "${REPLICA_PID[a]}"; }
wait_for 30 a_gone
wait "${REPLICA_PID[a]}" 2>/dev/null && fail "the cut-off leader exited with status 0"
grep -q "lost leadership" "$TMP/a.log" || fail "A did not say it lost leadership: $(tail -3 "$TMP/a.log")"
b_leads() { [[ $(leader) == "${HOST_ADDR[0]}:7070" ]]; }
wait_for 30 b_leads

# etcd's history since the cut: until B's leader key, only A's key going (its lease expired).
B_CREATED=$(etcdctl_ get /mh/leader -w json | json_get 'd["kvs"][0]["create_revision"]')
etcdctl_ watch --prefix /mh/ --rev=$((REV + 1)) -w json >"$TMP/history.json" &
WATCH=$!
history_read() { [[ $(wc -l <"$TMP/history.json") -ge 1 ]]; }
wait_for 30 history_read
kill "$WATCH" 2>/dev/null || true
"$PY" - "$TMP/history.json" "$REV" "$B_CREATED" <<'PY' || fail "A wrote after the cut"
import base64, json, sys
rev, b_created = int(sys.argv[2]), int(sys.argv[3])
changes = []
for line in open(sys.argv[1]):
    for e in json.loads(line).get("Events", []):
        kv = e["kv"]
        # etcdctl's JSON: "type" absent for a PUT (0), 1 for a DELETE.
        kind = "DELETE" if e.get("type") in (1, "DELETE") else "PUT"
        changes.append((int(kv["mod_revision"]), kind, base64.b64decode(kv["key"]).decode()))
before_b = [c for c in changes if c[0] < b_created]
assert all(c[1] == "DELETE" and c[2] == "/mh/leader" for c in before_b), before_b
print("revisions %d..%d: %s; B elected at %d" % (rev + 1, b_created - 1, before_b, b_created))
PY

# The workers follow B; the job was neither restarted nor failed by either leader.
reattached() { job_field "$JOB" '[e["reason"] for e in d["events"]]' | grep -q Reattached; }
wait_for 60 reattached
AFTER=$(generation_and_pid "$JOB" 0; generation_and_pid "$JOB" 1)
[[ "$AFTER" == "$BEFORE" ]] || fail "the job was decided twice: $BEFORE -> $AFTER"
heal 1 0
touch "$TMP/release"
wait_for 60 job_succeeded "$JOB"
[[ $(job_field "$JOB" 'len(d.get("restarts", {}).get("failures", []))') == 0 ]] || fail "failures recorded"
echo "PASS"
