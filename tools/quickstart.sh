#!/usr/bin/env bash
# Baton in one command, on a fresh Debian 12 machine (as root):
#   installs what is needed, builds, makes a throwaway CA, certificates and an admin token
#   (tools/certs.sh), starts a coordinator and two workers on loopback over mutual TLS in a
#   temporary directory, generates a small MNIST-format data set, submits
#   examples/quickstart.yaml through the CLI, shows live progress and the final result,
#   and shuts everything down. Exit 0 only if the job SUCCEEDED.
#
# Usage: tools/quickstart.sh [--keep]   (--keep: leave the temp dir with logs and state)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
KEEP=0
[[ "${1:-}" == "--keep" ]] && KEEP=1

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "Installing packages (apt, only what is missing)"
tools/install_deps.sh

step "Building (bazel, offline)"
bazel build //coordinator:baton-coordinator //worker:baton-worker \
  //worker/trainer:baton-trainer //client:baton //tools:make_mnist
BIN=$ROOT/bazel-bin
BATON=$BIN/client/baton

TMP=$(mktemp -d -t baton-quickstart.XXXXXX)
PIDS=()
cleanup() {
  local rc=$?
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if ((rc != 0)); then
    echo "quickstart failed (exit $rc); daemon logs:" >&2
    tail -n 20 "$TMP"/*.log >&2 2>/dev/null || true
  fi
  if ((KEEP)); then echo "kept $TMP"; else rm -rf "$TMP"; fi
  exit $rc
}
trap cleanup EXIT

# Polls `$@` until it succeeds or the deadline (seconds, $WAIT) passes.
wait_for() {
  local deadline=$((SECONDS + ${WAIT:-60}))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then echo "timed out waiting for: $*" >&2; return 1; fi
    sleep 0.1
  done
}

step "Generating a learnable MNIST-format data set"
"$BIN/tools/make_mnist" --out_dir="$TMP/data/mnist"

step "Making a throwaway CA, certificates and a token (tools/certs.sh)"
PKI=$TMP/pki
tools/certs.sh "$PKI" --worker worker-1 --worker worker-2 --user "${USER:-me}:admin"
# The CLI finds the coordinator's CA and the token through this config file's context.
export BATON_CONFIG=$PKI/config.yaml

step "Starting a coordinator and two workers on loopback (mutual TLS)"
"$BIN/coordinator/baton-coordinator" --listen=127.0.0.1:0 --port_file="$TMP/port" \
  --tls_cert="$PKI/coordinator.crt" --tls_key="$PKI/coordinator.key" --ca="$PKI/ca.crt" \
  --token_file="$PKI/tokens" \
  --metrics_listen=127.0.0.1:0 --metrics_port_file="$TMP/coordinator.metrics_port" \
  --state_dir="$TMP/state" 2>"$TMP/coordinator.log" &
PIDS+=($!)
wait_for test -s "$TMP/port"
export BATON_COORDINATOR=127.0.0.1:$(cat "$TMP/port")
for w in 1 2; do
  "$BIN/worker/baton-worker" --coordinator="$BATON_COORDINATOR" --work_dir="$TMP/worker-$w" \
    --ca="$PKI/ca.crt" --tls_cert="$PKI/workers/worker-$w.crt" \
    --tls_key="$PKI/workers/worker-$w.key" --allowed_paths="$TMP" --slots=1 \
    --metrics_listen=127.0.0.1:0 --metrics_port_file="$TMP/worker-$w.metrics_port" \
    2>"$TMP/worker-$w.log" &
  PIDS+=($!)
done
two_ready() { [[ $("$BATON" workers | grep -c READY) -ge 2 ]]; }
wait_for two_ready
"$BATON" workers
for f in coordinator worker-1 worker-2; do
  wait_for test -s "$TMP/$f.metrics_port"
  echo "Prometheus metrics of $f: http://127.0.0.1:$(cat "$TMP/$f.metrics_port")/metrics"
done

step "Submitting examples/quickstart.yaml (2 workers x 1 rank, MLP on MNIST)"
"$BATON" submit examples/quickstart.yaml --set trainer.data_dir="$TMP/data/mnist" \
  --set checkpoint_dir="$TMP/checkpoints" --wait

step "Done"
echo "final weights: $TMP/checkpoints/final.pt (deleted on exit; use --keep to keep them)"
