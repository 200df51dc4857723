#!/usr/bin/env bash
# Installs every Debian 12 package Baton needs to build, test and run (as root; idempotent:
# does nothing when everything is already installed). Nothing else is ever downloaded.
set -euo pipefail

PACKAGES=(
  # Build: Bazel (offline, Debian-packaged rules) and the C++ toolchain.
  bazel-bootstrap bazel-rules-java bazel-rules-proto build-essential pkgconf
  # gRPC + protobuf + Abseil.
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libabsl-dev
  # Storage, config, metrics, tests.
  libsqlite3-dev libyaml-cpp-dev prometheus-cpp-dev libgtest-dev libgmock-dev
  # TLS and tokens: libcrypto (token hashes, certificate names) and the openssl tool that
  # tools/certs.sh, the quickstart and the tests make a CA, certificates and tokens with.
  libssl-dev openssl
  # Prometheus server + promtool: the deploy/ rule and config checks and the e2e test that
  # scrapes the daemons with a real Prometheus.
  prometheus
  # LibTorch (CPU, c10d + Gloo) and a fast BLAS (the default reference BLAS is ~13x slower).
  libtorch-dev libgloo-dev libopenblas0-pthread
  # Header-only image decoding (JPEG/PNG) for image-folder datasets.
  libstb-dev
  # Python torch for torchrun-style jobs and for checking checkpoints load in Python.
  python3 python3-torch
  # Multi-host tests: hosts made of network/mount namespaces (ip, nsenter, unshare) and
  # partitions made with nftables rules.
  iproute2 util-linux nftables
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install_deps: missing packages: ${missing[*]}; run as root (or: sudo $0)" >&2
  exit 1
fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
