#!/usr/bin/env bash
# The build stage of every image in deploy/docker/, as one script the Dockerfiles RUN (and
# tools/check_image_build.sh runs outside Docker, so what an image build does is exercised
# without a Docker daemon).
#
# Usage, from the repository root:
#   build_stage.sh deps PROFILE      Installs the Debian 12 packages a build needs (as root):
#                                    base  gRPC, protobuf, Abseil, SQLite, yaml-cpp,
#                                          prometheus-cpp, OpenSSL, Bazel: enough for
#                                          baton-coordinator and baton
#                                    cpu   base + Debian's LibTorch (libtorch-dev, Gloo)
#                                    cuda  base + Gloo's headers; LibTorch and CUDA come
#                                          from the two commands below
#   build_stage.sh cuda-repo CUDA_MAJOR_MINOR NCCL_VERSION
#                                    Adds NVIDIA's CUDA apt repository for Debian 12 (its
#                                    signing key checked against NVIDIA_KEY_FINGERPRINT
#                                    before apt trusts it) and installs the CUDA runtime
#                                    headers and libraries of that CUDA version and NCCL
#                                    NCCL_VERSION (e.g. 2.21.5-1) built for it
#                                    (CUDA_HOME=/usr/local/cuda-X.Y, NCCL linked into it).
#   build_stage.sh libtorch URL SHA256 DEST
#                                    Downloads a pytorch.org LibTorch zip, checks its
#                                    SHA-256 (exit 1 on a mismatch, before unpacking) and
#                                    unpacks it so that DEST/include, DEST/lib exist.
#   build_stage.sh build OUT NAME... Builds the named programs (baton-coordinator,
#                                    baton-worker, baton-trainer, baton, make_mnist) with
#                                    `bazel build -c opt`, copies them (dereferenced) into
#                                    OUT, and checks each one starts: `--help` must exit 0
#                                    or 1 (Abseil's usage exit) and print its usage, so a
#                                    missing shared library (exit 127) fails the build.
#                                    Extra Bazel flags come from BATON_BAZEL_FLAGS (e.g.
#                                    "--repo_env=LIBTORCH_HOME=/opt/libtorch").
# Any failure exits non-zero with a message on stderr.
set -euo pipefail

# NVIDIA's CUDA repository signing key (3bf863cc), as NVIDIA publishes it.
readonly NVIDIA_KEY_FINGERPRINT="EB693B3035CD5710E231E123A4B469963BF863CC"
readonly NVIDIA_REPO="https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"
readonly NVIDIA_KEYRING=/usr/share/keyrings/nvidia-cuda.gpg

readonly BASE_PACKAGES=(
  bazel-bootstrap bazel-rules-java bazel-rules-proto build-essential pkgconf ca-certificates
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libabsl-dev
  libsqlite3-dev libyaml-cpp-dev prometheus-cpp-dev libssl-dev libstb-dev
)

die() {
  echo "build_stage: $*" >&2
  exit 1
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "$@"
}

cmd_deps() {
  local profile=${1:-}
  case "$profile" in
    base) apt_install "${BASE_PACKAGES[@]}" ;;
    cpu) apt_install "${BASE_PACKAGES[@]}" libtorch-dev libgloo-dev ;;
    # pytorch.org's LibTorch has no Gloo headers (c10d's ProcessGroupGloo.hpp needs them);
    # curl, gpg and unzip fetch and check the CUDA repository key and LibTorch.
    cuda) apt_install "${BASE_PACKAGES[@]}" libgloo-dev curl gpg unzip ;;
    *) die "deps: PROFILE must be base, cpu or cuda (got '$profile')" ;;
  esac
}

# Writes NVIDIA's key to NVIDIA_KEYRING and the repository to sources.list.d, refusing a
# key whose fingerprint differs.
add_nvidia_repo() {
  local key fpr
  key=$(mktemp)
  curl -fsSL "$NVIDIA_REPO/3bf863cc.pub" -o "$key"
  fpr=$(gpg --with-colons --show-keys "$key" | awk -F: '$1 == "fpr" { print $10; exit }')
  [[ "$fpr" == "$NVIDIA_KEY_FINGERPRINT" ]] ||
    die "NVIDIA key fingerprint is '$fpr', expected $NVIDIA_KEY_FINGERPRINT"
  gpg --dearmor <"$key" >"$NVIDIA_KEYRING"
  rm -f "$key"
  echo "deb [signed-by=$NVIDIA_KEYRING] $NVIDIA_REPO/ /" >/etc/apt/sources.list.d/nvidia-cuda.list
}

cmd_cuda_repo() {
  local version=${1:-} nccl=${2:-}
  [[ "$version" =~ ^[0-9]+\.[0-9]+$ ]] ||
    die "cuda-repo: CUDA_MAJOR_MINOR like 12.4 (got '$version')"
  [[ "$nccl" =~ ^[0-9.]+-[0-9]+$ ]] || die "cuda-repo: NCCL_VERSION like 2.21.5-1 (got '$nccl')"
  add_nvidia_repo
  # Host C++ only, no nvcc: cuda_runtime.h + libcudart, nccl.h + libnccl.
  apt_install "cuda-cudart-dev-${version/./-}" "libnccl-dev=$nccl+cuda$version" \
    "libnccl2=$nccl+cuda$version"
  # third_party/cuda.bzl looks for NCCL in CUDA_HOME; NVIDIA's NCCL packages install it in
  # /usr/include and /usr/lib/x86_64-linux-gnu.
  local home=/usr/local/cuda-$version f
  [[ -f "$home/include/cuda_runtime.h" ]] || die "cuda-repo: no $home/include/cuda_runtime.h"
  for f in /usr/include/nccl*.h; do ln -sf "$f" "$home/include/"; done
  for f in /usr/lib/x86_64-linux-gnu/libnccl.so*; do ln -sf "$f" "$home/lib64/"; done
}

cmd_libtorch() {
  (($# == 3)) || die "libtorch: URL SHA256 DEST"
  local url=$1 sha=$2 dest=$3 zip
  [[ "$sha" =~ ^[0-9a-f]{64}$ ]] || die "libtorch: SHA256 must be 64 lowercase hex digits"
  zip=$(mktemp --suffix=.zip)
  curl -fsSL "$url" -o "$zip"
  echo "$sha  $zip" | sha256sum --check --strict - >/dev/null ||
    die "libtorch: $url does not have SHA-256 $sha"
  rm -rf "$dest" "$dest.unpack"
  mkdir -p "$dest.unpack"
  unzip -q "$zip" -d "$dest.unpack"
  rm -f "$zip"
  # The zip holds one folder, libtorch/.
  mv "$dest.unpack/libtorch" "$dest"
  rmdir "$dest.unpack"
  [[ -f "$dest/include/torch/csrc/api/include/torch/torch.h" && -f "$dest/lib/libtorch.so" ]] ||
    die "libtorch: $dest is not an unpacked LibTorch"
}

# The Bazel label of each program an image may hold.
label_of() {
  case "$1" in
    baton-coordinator) echo //coordinator:baton-coordinator ;;
    baton-worker) echo //worker:baton-worker ;;
    baton-trainer) echo //worker/trainer:baton-trainer ;;
    baton) echo //client:baton ;;
    make_mnist) echo //tools:make_mnist ;;
    *) return 1 ;;
  esac
}

# Runs `PROGRAM --help`; fails unless it exits 0 or 1 with a usage text.
check_starts() {
  local program=$1 out rc=0
  out=$("$program" --help 2>&1) || rc=$?
  if ((rc > 1)) || ! grep -qiE "usage|$(basename "$program")" <<<"$out"; then
    echo "$out" | head -5 >&2
    die "$program --help exited $rc"
  fi
}

cmd_build() {
  (($# >= 2)) || die "build: OUT NAME..."
  local out=$1
  shift
  local labels=() name label
  for name in "$@"; do
    label=$(label_of "$name") || die "build: unknown program '$name'"
    labels+=("$label")
  done
  local flags=()
  read -r -a flags <<<"${BATON_BAZEL_FLAGS:-}"
  bazel build -c opt "${flags[@]}" "${labels[@]}"
  local bin
  bin=$(bazel info -c opt "${flags[@]}" bazel-bin)
  mkdir -p "$out"
  for label in "${labels[@]}"; do
    # //pkg:name -> bazel-bin/pkg/name
    local path=${label#//}
    cp -L "$bin/${path%%:*}/${path##*:}" "$out/"
  done
  for name in "$@"; do
    check_starts "$out/$name"
    echo "build_stage: $out/$name"
  done
}

main() {
  local cmd=${1:-}
  shift || true
  case "$cmd" in
    deps) cmd_deps "$@" ;;
    cuda-repo) cmd_cuda_repo "$@" ;;
    libtorch) cmd_libtorch "$@" ;;
    build) cmd_build "$@" ;;
    *) die "usage: build_stage.sh deps PROFILE | cuda-repo X.Y NCCL |" \
         "libtorch URL SHA256 DEST | build OUT NAME..." ;;
  esac
}

main "$@"
