#!/usr/bin/env bash
# Renders every overlay of deploy/k8s with kustomize (kubectl, offline) and checks the
# result: the Kubernetes, Prometheus Operator and cert-manager schemas with unknown fields
# rejected (schema_check.js), the deployment policy and the wiring against the real
# binaries' flags (policy_check.py with ha_policy.py, and its own test that every rule can
# fail; etcd's flags against Debian's etcd), and the PrometheusRule against alerts.yml. No API
# server is involved: none can run here.
set -euo pipefail
cd "${TEST_SRCDIR}/baton"
NODE_TOOLS=/opt/baton-node-tools/node_modules
command -v kubectl >/dev/null || { echo "FAIL: kubectl (with kustomize) is required" >&2; exit 1; }
[[ -x /usr/bin/etcd ]] || { echo "FAIL: /usr/bin/etcd missing: run tools/install_deps.sh" >&2; exit 1; }
[[ -d $NODE_TOOLS ]] || { echo "FAIL: $NODE_TOOLS missing: run tools/install_deps.sh" >&2; exit 1; }
CHECKS=deploy/k8s/checks
T=$TEST_TMPDIR
fail() { echo "FAIL: $*" >&2; exit 1; }

# kustomize does not follow the runfiles' symlinks: render a real copy.
mkdir -p "$T/deploy"
cp -rL deploy/k8s deploy/grafana "$T/deploy/"
coordinator/baton-coordinator --helpfull >"$T/coordinator.flags" 2>&1 || true
worker/baton-worker --helpfull >"$T/worker.flags" 2>&1 || true
/usr/bin/etcd --help >"$T/etcd.flags" 2>&1 || true

# gpu-ha: components/ha added to the GPU overlay as docs/DEPLOY.md says (not shipped).
mkdir -p "$T/deploy/k8s/overlays/gpu-ha"
sed 's|  # Last: it sets the images|  - ../../components/ha\n&|' deploy/k8s/overlays/gpu/kustomization.yaml \
  >"$T/deploy/k8s/overlays/gpu-ha/kustomization.yaml"
grep -q components/ha "$T/deploy/k8s/overlays/gpu-ha/kustomization.yaml" || fail "no gpu-ha overlay"
# gpu-queues: components/queues added to the GPU overlay as its kustomization says.
mkdir -p "$T/deploy/k8s/overlays/gpu-queues"
sed 's|  # Last: it sets the images|  - ../../components/queues\n&|' deploy/k8s/overlays/gpu/kustomization.yaml \
  >"$T/deploy/k8s/overlays/gpu-queues/kustomization.yaml"
grep -q components/queues "$T/deploy/k8s/overlays/gpu-queues/kustomization.yaml" || fail "no gpu-queues overlay"
for overlay in cpu gpu cpu-ha gpu-ha gpu-queues; do
  kubectl kustomize "$T/deploy/k8s/overlays/$overlay" >"$T/$overlay.yaml" \
    || fail "kustomize cannot render overlays/$overlay"
  NODE_PATH=$NODE_TOOLS node "$CHECKS/schema_check.js" "$T/$overlay.yaml"
  /usr/bin/python3 "$CHECKS/policy_check.py" "$T/$overlay.yaml" "$T/coordinator.flags" \
    "$T/worker.flags" deploy/docker "$T/etcd.flags"
done
grep -q -- "--store=etcd://" "$T/gpu-ha.yaml" || fail "gpu-ha has no coordinator replicas"
grep -q -- "--queue_file=" "$T/gpu-queues.yaml" || fail "gpu-queues has no queue file"
# The example queue file is one the coordinator accepts; a broken one it refuses.
coordinator/baton-coordinator --check_queue_file=deploy/k8s/components/queues/queues.yaml \
  >"$T/queues.out" 2>&1 || { cat "$T/queues.out"; fail "the example queue file was refused"; }
grep -q "2 queue(s)" "$T/queues.out" || { cat "$T/queues.out"; fail "the example file: $(cat "$T/queues.out")"; }
sed 's/slots: 16,/slots: -1,/' deploy/k8s/components/queues/queues.yaml >"$T/bad-queues.yaml"
if coordinator/baton-coordinator --check_queue_file="$T/bad-queues.yaml" >"$T/bad-queues.out" 2>&1; then
  fail "--check_queue_file accepted a negative quota"
fi
grep -q "bad-queues.yaml:[0-9]*:[0-9]*: " "$T/bad-queues.out" || { cat "$T/bad-queues.out"; fail "no file:line:col in the error"; }
/usr/bin/python3 "$CHECKS/policy_check_test.py" "$T/gpu.yaml" "$T/cpu-ha.yaml" \
  "$T/coordinator.flags" "$T/worker.flags" "$T/etcd.flags" deploy/docker

# components/ha before cert-manager: its patch of the coordinator's Certificate misses, with
# no word from kustomize; the policy must notice.
kubectl kustomize "$T/deploy/k8s/checks/testdata/ha-before-cert-manager" >"$T/ha-wrong.yaml" \
  || fail "kustomize cannot render testdata/ha-before-cert-manager"
if /usr/bin/python3 "$CHECKS/policy_check.py" "$T/ha-wrong.yaml" "$T/coordinator.flags" \
    "$T/worker.flags" deploy/docker "$T/etcd.flags" >"$T/ha-wrong.out" 2>&1; then
  fail "policy_check.py accepted testdata/ha-before-cert-manager"
fi
want="certificate baton-coordinator does not name baton-coordinator-0"
grep -qF "$want" "$T/ha-wrong.out" || { cat "$T/ha-wrong.out"; fail "no error: $want"; }

# The schema check refuses what it must (unknown fields in core and CRD objects, wrong
# types, unknown kinds).
if NODE_PATH=$NODE_TOOLS node "$CHECKS/schema_check.js" "$CHECKS/testdata/invalid_objects.yaml" \
    >"$T/invalid.out"; then
  fail "schema_check.js accepted testdata/invalid_objects.yaml"
fi
for want in "Pod/misspelt: unknown field /spec/containers/0/resourcez" \
    "StatefulSet/wrong-type: data/spec/replicas must be integer" \
    "ServiceMonitor/misspelt-monitor: unknown field /spec/endpoints/0/intervall" \
    "Certificate/misspelt-certificate: unknown field /spec/dnsName" \
    "Deploymnt/unknown-kind: unknown kind apps/v1 Deploymnt"; do
  grep -qF "$want" "$T/invalid.out" || { cat "$T/invalid.out"; fail "no error: $want"; }
done

# The GPU overlay patches worker flags by position, guarded by `test` operations: a change
# of the base's flags must make the render fail, not patch another flag.
sed -i 's/--drain_timeout=45s$/--drain_timeout=50s/' "$T/deploy/k8s/base/worker.yaml"
if kubectl kustomize "$T/deploy/k8s/overlays/gpu" >/dev/null 2>"$T/guard.err"; then
  fail "the GPU overlay patched a changed base without noticing"
fi
grep -q "test failed" "$T/guard.err" || { cat "$T/guard.err"; fail "unexpected render error"; }
# components/ha likewise replaces the workers' --coordinator and the coordinator's budget.
for change in 'worker.yaml s/--coordinator=baton-coordinator:7070$/--coordinator=x:7070/' \
    'coordinator.yaml s/^  maxUnavailable: 1$/  maxUnavailable: 2/'; do
  file=$T/deploy/k8s/base/${change%% *}
  cp "$file" "$T/saved.yaml"
  sed -i "${change#* }" "$file"
  cmp -s "$file" "$T/saved.yaml" && fail "'$change' changed nothing"
  if kubectl kustomize "$T/deploy/k8s/overlays/cpu-ha" >/dev/null 2>"$T/guard.err"; then
    fail "components/ha patched a changed base without noticing ($change)"
  fi
  grep -q "test failed" "$T/guard.err" || { cat "$T/guard.err"; fail "unexpected render error"; }
  cp "$T/saved.yaml" "$file"
done

# The PrometheusRule carries exactly alerts.yml's rules.
/usr/bin/python3 deploy/prometheus/make_prometheus_rule.py deploy/prometheus/alerts.yml \
  >"$T/prometheus-rule.yaml"
diff -u deploy/k8s/components/monitoring/prometheus-rule.yaml "$T/prometheus-rule.yaml" \
  || fail "prometheus-rule.yaml is out of date: regenerate it (deploy/prometheus/make_prometheus_rule.py)"
echo "PASS"
