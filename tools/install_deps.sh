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
  # Python torch for torchrun-style jobs and for checking checkpoints load in Python; gRPC,
  # protobuf and PyYAML for the Python client library (client/python, baton.client), and
  # pip (with setuptools and wheel) and venv for its offline install into a venv, the
  # README's way (//client/python:pip_install_test).
  python3 python3-torch python3-grpcio python3-protobuf python3-yaml python3-pip python3-venv
  # zsh: //client:completion_test loads `baton completion zsh` in a real zsh.
  zsh
  # Multi-host tests: hosts made of network/mount namespaces (ip, nsenter, unshare) and
  # partitions made with nftables rules.
  iproute2 util-linux nftables
  # deploy/docker/build_stage.sh's LibTorch download (checked by //deploy:docker_build_stage_test).
  curl unzip
  # The images' init (reaps orphans, forwards signals), which tests/multihost:k8s_pods_test
  # runs the pods' daemons under as the images do.
  tini
  # etcd 3.4: the coordinator's replicated store (a real member in the tests) and its gRPC
  # API's .proto files (@etcd_api, third_party/etcd.bzl).
  etcd-server etcd-client golang-etcd-server-dev
)

install_debian_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} == 0)); then
    echo "install_deps: all ${#PACKAGES[@]} Debian packages already installed"
    return 0
  fi
  if [[ $(id -u) -ne 0 ]]; then
    echo "install_deps: missing packages: ${missing[*]}; run as root (or: sudo $0)" >&2
    exit 1
  fi
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# The deploy/ checks' validators (tools/node/package.json, versions pinned by its lock file):
# `npm ci` into NODE_TOOLS, redone only when the lock file changes.
NODE_TOOLS=/opt/baton-node-tools
install_node_tools() {
  local src stamp
  src="$(cd "$(dirname "$0")/node" && pwd)"
  stamp="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)"
  if [[ -f "$NODE_TOOLS/.installed" && "$(cat "$NODE_TOOLS/.installed")" == "$stamp" ]]; then
    echo "install_deps: node tools already installed in $NODE_TOOLS"
    return 0
  fi
  if [[ $(id -u) -ne 0 && ! -w "$(dirname "$NODE_TOOLS")" ]]; then
    echo "install_deps: node tools missing in $NODE_TOOLS; run as root (or: sudo $0)" >&2
    exit 1
  fi
  if ! command -v npm >/dev/null; then
    if [[ $(id -u) -ne 0 ]]; then
      echo "install_deps: npm is missing; run as root (or: sudo $0)" >&2
      exit 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm
  fi
  echo "install_deps: npm ci into $NODE_TOOLS"
  rm -rf "$NODE_TOOLS.new"
  mkdir -p "$NODE_TOOLS.new"
  cp "$src/package.json" "$src/package-lock.json" "$NODE_TOOLS.new/"
  (cd "$NODE_TOOLS.new" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  echo "$stamp" >"$NODE_TOOLS.new/.installed"
  rm -rf "$NODE_TOOLS"
  mv "$NODE_TOOLS.new" "$NODE_TOOLS"
}

install_debian_packages
install_node_tools
