#!/usr/bin/env bash
# The slim images are complete and no bigger than needed: each Dockerfile's runtime package
# list covers every shared library its programs (built here by Bazel) link, and holds
# nothing else beyond the stated extras (runtime_libs_check.py). Then proves the check can
# fail, on copies of coordinator.Dockerfile with a needed package dropped or an unneeded
# one added.
set -euo pipefail
cd "${TEST_SRCDIR}/baton"
check() { /usr/bin/python3 deploy/docker/runtime_libs_check.py "$@"; }
COORDINATOR=coordinator/baton-coordinator
WORKER=(--binary=worker/baton-worker --binary=worker/trainer/baton-trainer
        --binary=client/baton --binary=tools/make_mnist)

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

check --dockerfile=deploy/docker/coordinator.Dockerfile --binary="$COORDINATOR" ||
  fail coordinator.Dockerfile
# Not linked, used at run time: Debian's LibTorch finds OpenBLAS through the libblas.so.3
# alternative; python3 and python3-torch run torchrun-style jobs.
check --dockerfile=deploy/docker/worker.Dockerfile "${WORKER[@]}" \
  --extra=libopenblas0-pthread --extra=python3 --extra=python3-torch || fail worker.Dockerfile
# LibTorch comes from the pytorch.org zip copied into /opt/libtorch/lib. The CUDA runtime
# and NCCL, linked by the CUDA build only, are named through shell variables (versions
# from ARGs), which the check skips: the binaries here are CPU builds.
check --dockerfile=deploy/docker/worker-cuda.Dockerfile "${WORKER[@]}" \
  --provided='^lib(torch|torch_cpu|torch_cuda|c10|c10_cuda)\.so' ||
  fail worker-cuda.Dockerfile

# Negative cases.
missing="$TEST_TMPDIR/missing.Dockerfile"
sed 's/ libsqlite3-0 / /' deploy/docker/coordinator.Dockerfile >"$missing"
! grep -q libsqlite3-0 "$missing" || fail "could not drop libsqlite3-0 from the copy"
if out=$(check --dockerfile="$missing" --binary="$COORDINATOR"); then
  fail "a Dockerfile without libsqlite3-0 passed"
elif ! grep -q "needs package libsqlite3-0" <<<"$out"; then
  fail "a Dockerfile without libsqlite3-0 failed for another reason: $out"
fi
unneeded="$TEST_TMPDIR/unneeded.Dockerfile"
sed 's/ libsqlite3-0 / libsqlite3-0 libopenblas0-pthread /' deploy/docker/coordinator.Dockerfile \
  >"$unneeded"
if out=$(check --dockerfile="$unneeded" --binary="$COORDINATOR"); then
  fail "a Dockerfile installing libopenblas0-pthread for the coordinator passed"
elif ! grep -q "installs libopenblas0-pthread, which no program needs" <<<"$out"; then
  fail "the unneeded-package copy failed for another reason: $out"
fi
((failures == 0))
