#!/usr/bin/env bash
# The hierarchical CPU all-reduce (shared memory inside a host, Gloo between one leader per
# host) against flat Gloo between all ranks, on 2 hosts x 2 ranks of the multi-host harness
# (tests/multihost/cluster.sh: a network, mount and UTS namespace per host, so each host
# has its own /dev/shm and reaches the other over a veth link). baton-trainer runs directly
# (no coordinator), with the torchrun environment of worker/trainer/contract/contract.h; the same
# model and data as bench/trainer_vs_torchrun.sh (MLP 784-512-512-10 on MNIST-format data,
# batch 64/rank, SGD with momentum, 1 thread per rank); hierarchical and flat runs
# alternate. Prints samples/s min/median/max per backend, rank 0's step-time split, and last
# `ratio=<hierarchical / flat samples/s, medians>`.
#
# Usage: bench/hierarchical_vs_flat.sh [REPEATS=3] [STEPS=300]
# Needs root (namespaces) and nft; builds //worker/trainer:baton-trainer //tools:make_mnist.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
STEPS=${2:-300}
WARMUP=30
LOG_EVERY=10
PY=/usr/bin/python3
source bench/lib.sh
build_trainer
TRAINER=$(readlink -f "$BIN/worker/trainer/baton-trainer")

# Every host has a private /tmp: the work directory must be elsewhere. lib.sh removes it
# on exit after the cluster is gone (its cleanup hooks run first).
TEST_TMPDIR=$(mktemp -d /var/tmp/baton-hier-bench.XXXXXX)
export TEST_TMPDIR
source tests/e2e/lib.sh
source tests/multihost/cluster.sh
cluster_create 2
remove_workdir() { rm -rf "$TEST_TMPDIR"; }
CLEANUP_HOOKS+=(remove_workdir)
"$BIN/tools/make_mnist" --out_dir="$TMP/mnist" --train_size=12000 --test_size=100 >/dev/null

MLP=(--model=mlp --dataset=mnist --data_dir="$TMP/mnist" --hidden=512,512 --batch_size=64
  --threads=1 --lr=0.05 --momentum=0.9 --max_steps=$((WARMUP + STEPS)) --log_every=$LOG_EVERY
  --rendezvous_timeout=60s --collective_timeout=60s)

# run_gang BACKEND: ranks 0-1 on host 0, 2-3 on host 1; prints rank 0's samples/s.
run_gang() {
  local backend=$1 port r host
  # A port the OS finds free on host 0, where rank 0 serves the store.
  port=$(on 0 "$PY" -c 'import socket; s=socket.socket(); s.bind(("198.18.0.1",0)); print(s.getsockname()[1])')
  local pids=()
  for r in 0 1 2 3; do
    host=$((r / 2))
    on "$host" env RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) LOCAL_WORLD_SIZE=2 \
      GROUP_RANK=$host MASTER_ADDR="${HOST_ADDR[0]}" MASTER_PORT="$port" GLOO_SOCKET_IFNAME=eth0 \
      OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 BATON_METRICS_FD=3 \
      "$TRAINER" "${MLP[@]}" --cpu_backend="$backend" \
      3>"$TMP/metrics-$r.jsonl" >"$TMP/out-$r" 2>"$TMP/err-$r" &
    pids+=($!)
  done
  # One failed rank ends the run at once (the others would wait for it). `wait -n` may
  # report two ranks that exit together once; 127 then means none is left to report.
  local rc
  for _ in "${pids[@]}"; do
    rc=0
    wait -n || rc=$?
    ((rc == 127)) && break
    if ((rc != 0)); then
      kill "${pids[@]}" 2>/dev/null || true
      tail -n 3 "$TMP"/err-* >&2
      fail "a $backend rank exited $rc"
    fi
  done
  wait
  grep -q "on cpu ($backend" "$TMP/out-0" || { cat "$TMP/out-0" >&2; fail "rank 0 not on $backend"; }
  baton_rate "$TMP/metrics-0.jsonl"
}

echo "== MLP 784-512-512-10, batch 64/rank, 2 hosts x 2 ranks x 1 thread on $(nproc) cores," \
  "${STEPS} timed steps after ${WARMUP}, ${REPEATS} repeats"
H=(); F=()
for ((i = 0; i < REPEATS; i++)); do
  H+=("$(run_gang hierarchical)")
  cp "$TMP/metrics-0.jsonl" "$TMP/split-hier.jsonl"
  F+=("$(run_gang gloo)")
  cp "$TMP/metrics-0.jsonl" "$TMP/split-flat.jsonl"
  echo "  repeat $((i + 1)): hierarchical ${H[-1]%.*}  flat gloo ${F[-1]%.*} samples/s"
done
echo "hierarchical (shm + gloo between leaders): $(stats "${H[@]}") samples/s"
echo "flat gloo (all 4 ranks):                   $(stats "${F[@]}") samples/s"
echo "step-time split, rank 0, last repeat (ms):"
echo "  hierarchical: $(baton_split "$TMP/split-hier.jsonl")"
echo "  flat gloo:    $(baton_split "$TMP/split-flat.jsonl")"
echo "ratio=$(ratio "$(median "${H[@]}")" "$(median "${F[@]}")")"
