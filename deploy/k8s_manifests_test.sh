#!/usr/bin/env bash
# Renders deploy/k8s with kustomize (kubectl, offline) and checks the result against the
# real binaries: every flag the manifests pass exists, and the wiring is consistent.
set -euo pipefail
cd "${TEST_SRCDIR}/baton"
command -v kubectl >/dev/null || { echo "FAIL: kubectl (with kustomize) is required" >&2; exit 1; }
cp -rL deploy/k8s "$TEST_TMPDIR/k8s"  # kustomize does not follow runfiles symlinks
kubectl kustomize "$TEST_TMPDIR/k8s" >"$TEST_TMPDIR/rendered.yaml"
coordinator/baton-coordinator --helpfull >"$TEST_TMPDIR/coordinator.flags" 2>&1 || true
worker/baton-worker --helpfull >"$TEST_TMPDIR/worker.flags" 2>&1 || true
/usr/bin/python3 deploy/k8s_manifests_check.py "$TEST_TMPDIR/rendered.yaml" \
  "$TEST_TMPDIR/coordinator.flags" "$TEST_TMPDIR/worker.flags"
