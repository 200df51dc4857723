#!/usr/bin/env bash
# Exercises the images' build logic on this machine, without Docker (a Bazel test cannot:
# it would run Bazel inside Bazel):
#   1. deploy/docker/build_stage.sh build -- the same command every Dockerfile's build stage
#      RUNs -- into a scratch directory: `bazel build -c opt` of the five programs, copied
#      out and each started with --help;
#   2. deploy/docker/runtime_libs_check.py on those optimised binaries, for each image;
#   3. the LIBTORCH_HOME path the CUDA image builds through: Debian's LibTorch arranged as a
#      pytorch.org LibTorch (DIR/include, DIR/lib: a tree of symlinks), baton-trainer built
#      with --repo_env=LIBTORCH_HOME=DIR in a separate output base (the normal build's
#      outputs and its @torch stay as they are), checked to load LibTorch from DIR/lib, and
#      started with --help.
# Needs tools/install_deps.sh's packages (not Docker). Usage: tools/check_image_build.sh
# [SCRATCH=/tmp/baton-image-check]. Prints PASS/FAIL per step; exits 1 if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
SCRATCH=${1:-/tmp/baton-image-check}
OUT="$SCRATCH/out"
PROGRAMS=(baton-coordinator baton-worker baton-trainer baton make_mnist)
failures=0
step() {
  local name=$1
  shift
  local start=$SECONDS
  if "$@"; then
    echo "PASS: $name ($((SECONDS - start)) s)"
  else
    echo "FAIL: $name ($((SECONDS - start)) s)"
    failures=$((failures + 1))
  fi
}

rm -rf "$SCRATCH"
mkdir -p "$SCRATCH"

echo "== 1. build_stage.sh build $OUT ${PROGRAMS[*]}"
step "build stage" deploy/docker/build_stage.sh build "$OUT" "${PROGRAMS[@]}"

echo "== 2. runtime packages against the -c opt binaries"
libs() { /usr/bin/python3 deploy/docker/runtime_libs_check.py "$@"; }
WORKER=(--binary="$OUT/baton-worker" --binary="$OUT/baton-trainer" --binary="$OUT/baton"
        --binary="$OUT/make_mnist")
step "coordinator.Dockerfile packages" \
  libs --dockerfile=deploy/docker/coordinator.Dockerfile --binary="$OUT/baton-coordinator"
step "worker.Dockerfile packages" libs --dockerfile=deploy/docker/worker.Dockerfile \
  "${WORKER[@]}" --extra=libopenblas0-pthread --extra=python3 --extra=python3-torch
step "worker-cuda.Dockerfile packages" libs --dockerfile=deploy/docker/worker-cuda.Dockerfile \
  "${WORKER[@]}" --provided='^lib(torch|torch_cpu|torch_cuda|c10|c10_cuda)\.so'

echo "== 3. baton-trainer through --repo_env=LIBTORCH_HOME"
HOME_DIR="$SCRATCH/libtorch"
OUTPUT_BASE="$SCRATCH/output_base"
# pytorch.org's layout: include/{ATen,c10,caffe2,torch,...} with the C++ frontend under
# include/torch/csrc/api/include, lib/libtorch.so, libtorch_cpu.so, libc10.so.
make_libtorch_home() {
  mkdir -p "$HOME_DIR/include" "$HOME_DIR/lib"
  local d f
  for d in ATen c10 caffe2 torch; do
    [[ -d /usr/include/$d ]] || { echo "no /usr/include/$d (libtorch-dev)"; return 1; }
    ln -s "/usr/include/$d" "$HOME_DIR/include/$d"
  done
  for f in /usr/lib/x86_64-linux-gnu/lib{torch,torch_cpu,c10}.so*; do
    ln -s "$f" "$HOME_DIR/lib/"
  done
  [[ -f "$HOME_DIR/include/torch/csrc/api/include/torch/torch.h" &&
     -e "$HOME_DIR/lib/libtorch.so" ]]
}
sep_bazel() { bazel --output_base="$OUTPUT_BASE" "$@"; }
build_with_home() {
  sep_bazel build --repo_env=LIBTORCH_HOME="$HOME_DIR" //worker/trainer:baton-trainer
}
trainer_uses_home() {
  local ob trainer
  ob=$(sep_bazel info output_base) || return 1
  grep -q "LIBTORCH_HOME=$HOME_DIR" "$ob/external/torch/BUILD.bazel" ||
    { echo "@torch was not generated from $HOME_DIR"; return 1; }
  trainer="$(sep_bazel info --repo_env=LIBTORCH_HOME="$HOME_DIR" bazel-bin)"
  trainer+=/worker/trainer/baton-trainer
  readelf -d "$trainer" | grep -E "R(UN)?PATH" | grep -q "$HOME_DIR/lib" ||
    { echo "no $HOME_DIR/lib in the RUNPATH"; readelf -d "$trainer" | grep -E "R(UN)?PATH";
      return 1; }
  ldd "$trainer" | grep -E "lib(torch|torch_cpu|c10)\.so" | tee "$SCRATCH/ldd.txt"
  (($(grep -c "=> $HOME_DIR/lib/" "$SCRATCH/ldd.txt") == 3)) ||
    { echo "LibTorch not loaded from $HOME_DIR/lib"; return 1; }
  local out rc=0
  out=$("$trainer" --help 2>&1) || rc=$?
  ((rc <= 1)) && grep -q "baton-trainer" <<<"$out" || { echo "$out" | head -5; return 1; }
}
step "pytorch.org layout from Debian's LibTorch" make_libtorch_home
step "bazel build --repo_env=LIBTORCH_HOME //worker/trainer:baton-trainer" build_with_home
step "baton-trainer links and loads LibTorch from LIBTORCH_HOME, --help" trainer_uses_home
sep_bazel shutdown

echo "== $failures failed"
((failures == 0))
