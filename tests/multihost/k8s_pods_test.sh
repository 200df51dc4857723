#!/usr/bin/env bash
# The Kubernetes manifests, run as pods: the real daemons started with exactly the command
# (the images' ENTRYPOINT: tini and the daemon), args and env the rendered overlays give
# (deploy/k8s/checks/pod_spec.py), each pod a host
# of its own (cluster.sh) as on a cluster network, its volumes laid at their mountPaths
# (Secrets and the cert-manager csi volume as files the way they mount them; the shared
# ReadWriteMany claim one directory for all), a read-only root file system, the pod's user
# and group with no capabilities and no_new_privs, its sysctls, and the NetworkPolicies
# enforced as nftables rules (deploy/k8s/checks/netpol_nft.py). What Kubernetes itself
# does (scheduling, the API server, cgroup limits, seccomp) is not here: none can run.
#
# Pods: baton-coordinator-0 (host 0), baton-worker-0 of the cpu overlay (host 1),
# baton-worker-1 of the gpu overlay (host 2, --slots=8 from its 8 GPUs: this machine has
# none, so they are CPU slots), host 3 in namespace "monitoring" labelled as Prometheus
# (the scrapes, and the users' CLI), and host 4, the node: the kubelet's probes come from
# there, which network plugins admit whatever the policies say.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
source "${TEST_SRCDIR}/baton/tests/multihost/cluster.sh"
CHECKS=$RUNFILES/deploy/k8s/checks
PROBE=$RUNFILES/tools/grpc_health_probe
[[ $TMP != /tmp/* ]] || fail "TMP ($TMP) is under /tmp, which every host has privately"
[[ -x /usr/bin/tini ]] || fail "tini (the images' init) is missing: run tools/install_deps.sh"

cluster_create 5
NODE_IP=${HOST_ADDR[4]}
COORD_IP=${HOST_ADDR[0]}

# ---- Render the overlays ---------------------------------------------------------------
mkdir -p "$TMP/deploy"
cp -rL "$RUNFILES/deploy/k8s" "$RUNFILES/deploy/grafana" "$TMP/deploy/"
for overlay in cpu gpu; do
  kubectl kustomize "$TMP/deploy/k8s/overlays/$overlay" >"$TMP/$overlay.yaml"
done

# ---- The image: the binaries at /usr/local/bin ------------------------------------------
IMAGE=$TMP/image
mkdir -p "$IMAGE"
cp -L "$COORDINATOR_BIN" "$WORKER_BIN" "$TRAINER_BIN" "$BATON_BIN" "$IMAGE/"
chmod 0755 "$IMAGE" "$IMAGE"/*

# ---- Secrets and certificates, as the pods mount them ------------------------------------
rm -f "$PKI/coordinator.crt"
"$CERTS" "$PKI" --coordinator-san "DNS:baton-coordinator,DNS:baton-coordinator.baton.svc,DNS:baton-coordinator.baton.svc.cluster.local,IP:$COORD_IP" \
  --worker baton-worker-0 --worker baton-worker-1 >/dev/null
secret() {  # secret NAME FILE=SOURCE...: files root:fsGroup, mode 0440 (defaultMode 0440)
  local dir=$TMP/state/secrets/$1 kv
  shift
  mkdir -p "$dir"
  for kv in "$@"; do cp "${kv#*=}" "$dir/${kv%%=*}"; done
  chgrp -R 65532 "$dir" && chmod 0440 "$dir"/* && chmod 0755 "$dir"
}
secret baton-coordinator-tls tls.crt="$PKI/coordinator.crt" tls.key="$PKI/coordinator.key" \
  ca.crt="$PKI/ca.crt"
secret baton-tokens tokens="$PKI/tokens"
for pod in baton-worker-0 baton-worker-1; do
  # cert-manager's csi-driver: tls.crt, tls.key, ca.crt, for the pod's own name.
  mkdir -p "$TMP/state/csi/$pod"
  cp "$PKI/workers/$pod.crt" "$TMP/state/csi/$pod/tls.crt"
  cp "$PKI/workers/$pod.key" "$TMP/state/csi/$pod/tls.key"
  cp "$PKI/ca.crt" "$TMP/state/csi/$pod/ca.crt"
  chgrp -R 65532 "$TMP/state/csi/$pod" && chmod 0440 "$TMP/state/csi/$pod"/*
done
# Training data on the shared volume (made as an administrator would).
SHARED=$TMP/state/pvc/baton-shared
make_data "$SHARED/data/mnist"
chmod -R a+rX "$SHARED"

# ---- Network policies --------------------------------------------------------------------
cat >"$TMP/peers.json" <<JSON
{"baton-coordinator-0": {"ip": "${HOST_ADDR[0]}", "namespace": "baton", "labels": {"app.kubernetes.io/name": "baton-coordinator"}},
 "baton-worker-0": {"ip": "${HOST_ADDR[1]}", "namespace": "baton", "labels": {"app.kubernetes.io/name": "baton-worker"}},
 "baton-worker-1": {"ip": "${HOST_ADDR[2]}", "namespace": "baton", "labels": {"app.kubernetes.io/name": "baton-worker"}},
 "prometheus-0": {"ip": "${HOST_ADDR[3]}", "namespace": "monitoring", "labels": {"app.kubernetes.io/name": "prometheus"}}}
JSON

# pod_start HOST OVERLAY STATEFULSET ORDINAL: the pod, its sysctls and its policies; the
# container's pid in POD_PID[name], its spec in $TMP/<name>.json.
declare -A POD_PID=()
pod_start() {
  local host=$1 overlay=$2 set=$3 ordinal=$4 name=$3-$4 sysctl
  "$PY" "$CHECKS/pod_spec.py" "$TMP/$overlay.yaml" "$set" "$ordinal" "${HOST_ADDR[host]}" \
    "$RUNFILES/deploy/docker" >"$TMP/$name.json"
  "$PY" "$RUNFILES/tests/multihost/pod_launcher.py" "$TMP/$name.json" "$TMP/state" "$IMAGE" \
    "$COORD_IP baton-coordinator baton-coordinator.baton.svc baton-coordinator.baton.svc.cluster.local" \
    >"$TMP/$name.sh"
  while IFS='=' read -r sysctl value; do
    [[ -n $sysctl ]] && on "$host" sysctl -q -w "$sysctl=$value"
  done < <("$PY" -c 'import json,sys; [print("%s=%s" % kv) for kv in json.load(open(sys.argv[1]))["sysctls"].items()]' "$TMP/$name.json")
  "$PY" "$CHECKS/netpol_nft.py" "$TMP/$overlay.yaml" "$name" "$TMP/peers.json" "$NODE_IP" \
    >"$TMP/$name.nft"
  on "$host" nft -f "$TMP/$name.nft"
  (on_exec "$host" unshare --mount --uts --propagation private bash "$TMP/$name.sh" \
    >>"$TMP/$name.log" 2>&1) &
  POD_PID[$name]=$!
  WORKER_PIDS[$name]=$!  # stopped by lib.sh on exit
}
spec_field() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$TMP/$1.json"; }
# probe POD KIND IP: the pod's probe of that kind (readinessProbe, ...), from the node.
probe() {
  local spec=$TMP/$1.json ip port
  alive "${POD_PID[$1]}" || fail "pod $1 exited: $(tail -5 "$TMP/$1.log")"
  ip=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["env"].get("POD_IP", sys.argv[2]))' "$spec" "$3")
  if port=$(spec_field "$1" "d['probes']['$2']['grpc']" 2>/dev/null); then
    on 4 "$PROBE" "$ip:$port" "$(spec_field "$1" "d['probes']['$2']['service']")"
  else
    port=$(spec_field "$1" "d['probes']['$2']['http']")
    on 4 "$PY" -c "import sys, urllib.request
urllib.request.urlopen('http://%s:%s%s' % tuple(sys.argv[1:4]), timeout=5).read()" \
      "$ip" "$port" "$(spec_field "$1" "d['probes']['$2']['path']")"
  fi
}

# ---- Workers first: alive, but not ready without a coordinator's lease -----------------
pod_start 1 cpu baton-worker 0
pod_start 2 gpu baton-worker 1
for pod in baton-worker-0 baton-worker-1; do
  h=$([[ $pod == baton-worker-0 ]] && echo 1 || echo 2)
  wait_for 60 probe "$pod" startupProbe "${HOST_ADDR[h]}"
  probe "$pod" livenessProbe "${HOST_ADDR[h]}" >/dev/null || fail "$pod is not live"
  if out=$(probe "$pod" readinessProbe "${HOST_ADDR[h]}"); then
    fail "$pod is ready with no coordinator"
  fi
  [[ $out == NOT_SERVING ]] || fail "$pod readiness without a coordinator: $out"
done

# ---- The coordinator --------------------------------------------------------------------
pod_start 0 cpu baton-coordinator 0
COORDINATOR_PID=${POD_PID[baton-coordinator-0]}
for p in startupProbe readinessProbe livenessProbe; do
  wait_for 60 probe baton-coordinator-0 "$p" "$COORD_IP"
done
[[ $(stat -c %u "$TMP/state/pvc/state-baton-coordinator-0/coordinator.db") == 65532 ]] \
  || fail "the coordinator's state is not written by uid 65532: $(ls -ln "$TMP/state/pvc/state-baton-coordinator-0")"
# Now the workers register, hold leases, and become ready.
wait_for 60 probe baton-worker-0 readinessProbe "${HOST_ADDR[1]}"
wait_for 60 probe baton-worker-1 readinessProbe "${HOST_ADDR[2]}"

# The users' side: the CLI on host 3, with a submitter's token over mTLS.
export BATON_COORDINATOR=$COORD_IP:7070
baton_on_host3() { on 3 "$BATON_BIN" "$@"; }
BATON=baton_on_host3
wait_for_workers 2
"$BATON" workers -o json >"$TMP/workers.json"
"$PY" - "$TMP/workers.json" "${HOST_ADDR[1]}" "${HOST_ADDR[2]}" <<'PY' || fail "workers: $(cat "$TMP/workers.json")"
import json, sys
workers = {w["id"]: w for w in json.load(open(sys.argv[1]))["workers"]}
assert sorted(workers) == ["baton-worker-0", "baton-worker-1"], sorted(workers)
w0, w1 = workers["baton-worker-0"], workers["baton-worker-1"]
# The cpu overlay's worker: one slot; the gpu overlay's: --slots=8 (its nvidia.com/gpu).
assert int(w0["resources"]["slots"]) == 1, w0
assert int(w1["resources"]["slots"]) == 8, w1
# Each advertises its pod IP ($(POD_IP) in the args).
assert (w0["host"], w1["host"]) == (sys.argv[2], sys.argv[3]), (w0["host"], w1["host"])
print("workers: baton-worker-0 (1 slot, %s), baton-worker-1 (8 slots, %s)" % (w0["host"], w1["host"]))
PY

# ---- A training job across both pods, checkpoints on the shared volume ------------------
cat >"$TMP/job.yaml" <<YAML
name: k8s-pods
trainer: {model: mlp, dataset: mnist, data_dir: /mnt/baton/data/mnist, batch_size: 16, lr: 0.05, seed: 3, hidden: [64], log_every: 5, threads: 1}
workers: {min: 2}
slots_per_worker: 1
budget: {max_steps: 30}
checkpoint_dir: /mnt/baton/checkpoints/k8s-pods
YAML
"$BATON" submit "$TMP/job.yaml" --wait >"$TMP/job.out" 2>&1 || { cat "$TMP/job.out"; fail "the job did not succeed"; }
JOB=$("$BATON" jobs -o json | json_get 'd["jobs"][0]["id"]')
[[ $(job_field "$JOB" 'len(set(r["worker_id"] for r in d["ranks"]))') == 2 ]] || fail "not on both pods"
# Rank 0's rendezvous port is one the NetworkPolicy between workers admits: the pods'
# ip_local_port_range confines it (and the collectives' ports) to the policy's range.
port=$(job_field "$JOB" 'd["master_port"]')
((port >= 40000 && port <= 44999)) || fail "MASTER_PORT $port is outside the policy's 40000-44999"
[[ -f $SHARED/checkpoints/k8s-pods/final.pt ]] || fail "no final checkpoint on the shared volume: $(ls -R "$SHARED")"
[[ $(stat -c %u "$SHARED/checkpoints/k8s-pods/final.pt") == 65532 ]] || fail "checkpoint not written by uid 65532"

# ---- The policies are enforced: a worker pod is not Prometheus ---------------------------
metrics() { on "$1" "$PY" -c "import sys, urllib.request
urllib.request.urlopen('http://%s:7071/metrics' % sys.argv[1], timeout=5).read()" "$COORD_IP"; }
metrics 3 || fail "Prometheus (host 3) cannot scrape the coordinator"
if metrics 1 2>"$TMP/denied.err"; then fail "a worker pod reached the coordinator's metrics port"; fi
grep -q "Connection refused" "$TMP/denied.err" || fail "unexpected error: $(cat "$TMP/denied.err")"

# ---- Token rotation as docs/DEPLOY.md says: new Secret content, SIGHUP to the pod's PID 1
# (the image's init, which passes it on to the coordinator) ------------------------------
"$CERTS" "$PKI" --user bob:viewer >/dev/null
bob() { BATON_TOKEN=$(cat "$PKI/users/bob.token") "$BATON" workers >"$TMP/bob.out" 2>&1; }
if bob; then fail "bob's token worked before the coordinator re-read the tokens"; fi
grep -qi "unauthenticated\|token" "$TMP/bob.out" || fail "unexpected refusal: $(cat "$TMP/bob.out")"
cp "$PKI/tokens" "$TMP/state/secrets/baton-tokens/tokens.new"
mv "$TMP/state/secrets/baton-tokens/tokens.new" "$TMP/state/secrets/baton-tokens/tokens"
chgrp 65532 "$TMP/state/secrets/baton-tokens/tokens" && chmod 0440 "$TMP/state/secrets/baton-tokens/tokens"
kill -HUP "${POD_PID[baton-coordinator-0]}"
wait_for 30 bob

# ---- Termination: SIGTERM (what eviction sends) ends each pod within its grace period ---
for pod in baton-worker-1 baton-worker-0 baton-coordinator-0; do
  grace=$(spec_field "$pod" 'd["grace_seconds"]')
  kill -TERM "${POD_PID[$pod]}"
  deadline=$((SECONDS + grace))
  while alive "${POD_PID[$pod]}"; do
    ((SECONDS < deadline)) || fail "$pod outlived its terminationGracePeriodSeconds ($grace s)"
    sleep 0.05
  done
  wait "${POD_PID[$pod]}" || fail "$pod exited with status $? on SIGTERM"
  unset "WORKER_PIDS[$pod]"
done
COORDINATOR_PID=
grep -q "drain" "$TMP/baton-worker-1.log" || fail "baton-worker-1 did not drain on SIGTERM"
echo "PASS"
