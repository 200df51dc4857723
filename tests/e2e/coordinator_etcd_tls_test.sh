#!/usr/bin/env bash
# A coordinator replica on an etcd that only speaks mutual TLS (--client-cert-auth): with
# --etcd_ca/--etcd_cert/--etcd_key it leads and its state lands in etcd; without a client
# certificate it cannot, and says why.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

# The cluster CA signs etcd's server certificate (the coordinator's: it names 127.0.0.1)
# and the coordinator's client certificate for etcd (a worker-style one).
worker_tls etcd-client
CLIENT=127.0.0.1:$(free_port)
PEER=127.0.0.1:$(free_port)
/usr/bin/etcd --name=m0 --data-dir="$TMP/etcd-tls" --listen-client-urls="https://$CLIENT" \
  --advertise-client-urls="https://$CLIENT" --listen-peer-urls="http://$PEER" \
  --initial-advertise-peer-urls="http://$PEER" --initial-cluster="m0=http://$PEER" \
  --cert-file="$PKI/coordinator.crt" --key-file="$PKI/coordinator.key" \
  --trusted-ca-file="$PKI/ca.crt" --client-cert-auth --logger=zap --log-level=warn \
  2>>"$TMP/etcd.log" &
EXTRA_PIDS+=($!)
tls_etcdctl() {
  ETCDCTL_API=3 /usr/bin/etcdctl --endpoints="https://$CLIENT" --cacert="$PKI/ca.crt" \
    --cert="$PKI/workers/etcd-client.crt" --key="$PKI/workers/etcd-client.key" "$@"
}
wait_for 30 tls_etcdctl endpoint health

# Without a client certificate: refused by etcd, the replica stays a standby saying why.
"$COORDINATOR_BIN" --store="etcd://$CLIENT/tls" --listen=127.0.0.1:0 --port_file="$TMP/plain.port" \
  "${COORDINATOR_TLS[@]}" --metrics_listen= --state_dir="$TMP/plain" --etcd_ca="$PKI/ca.crt" \
  2>>"$TMP/plain.log" &
PLAIN=$!
EXTRA_PIDS+=("$PLAIN")
says_why() { grep -q "election: .*etcd 127.0.0.1" "$TMP/plain.log"; }
wait_for 30 says_why
tls_etcdctl get /tls/leader --print-value-only | grep -q . && fail "a replica without a client certificate leads"
kill -TERM "$PLAIN"
wait "$PLAIN" || fail "the standby exited with status $?"

# With one: it leads; a submitted job is in etcd.
"$COORDINATOR_BIN" --store="etcd://$CLIENT/tls" --listen=127.0.0.1:0 --port_file="$TMP/tls.port" \
  "${COORDINATOR_TLS[@]}" --metrics_listen= --state_dir="$TMP/tls" --etcd_ca="$PKI/ca.crt" \
  --etcd_cert="$PKI/workers/etcd-client.crt" --etcd_key="$PKI/workers/etcd-client.key" \
  2>>"$TMP/tls.log" &
EXTRA_PIDS+=($!)
wait_for 30 test -s "$TMP/tls.port"
export BATON_COORDINATOR=127.0.0.1:$(cat "$TMP/tls.port")
leads() { [[ $(tls_etcdctl get /tls/leader --print-value-only) == "$BATON_COORDINATOR" ]]; }
wait_for 30 leads
cat >"$TMP/job.yaml" <<YAML
name: in-etcd
command: {argv: ["/bin/true"]}
workers: {min: 1}
YAML
JOB=$("$BATON" submit "$TMP/job.yaml")
# Read whole, then matched: grep -q stopping early could fail the pipeline (SIGPIPE).
KEYS=$(tls_etcdctl get "/tls/job/$JOB" --keys-only)
grep -q "/tls/job/$JOB" <<<"$KEYS" || fail "job $JOB is not in etcd (etcdctl: '$KEYS')"
echo "PASS"
